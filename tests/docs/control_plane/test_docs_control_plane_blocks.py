"""The docs' `<!-- doc-test: run control-plane -->` blocks exit 0 on the local control plane.

One test per block (id `file:line`), as `run` blocks run, with KUBECONFIG of the session's
control plane and kubectl and helm on PATH. A block cleans up after itself or works in a
namespace of its own.
"""

from __future__ import annotations

import pytest
from doc_checks import (
    REPO_ROOT,
    Doc,
    block_script,
    describe_failure,
    docs_of,
    marker_kind,
    run_block,
)
from markdown_blocks import Fence

BLOCKS = [
    (doc, fence)
    for doc in docs_of(REPO_ROOT)
    for fence in doc.document.fences
    if fence.is_shell and marker_kind(fence) == "run control-plane"
]


@pytest.mark.parametrize(
    ("doc", "fence"), BLOCKS, ids=[f"{doc.label}:{fence.line}" for doc, fence in BLOCKS]
)
def test_control_plane_block_exits_zero(
    doc: Doc, fence: Fence, control_plane_block_env: dict[str, str]
) -> None:
    run = run_block(block_script(fence), cwd=REPO_ROOT, env=control_plane_block_env)
    if run.returncode != 0:
        pytest.fail(describe_failure(doc.label, fence, run), pytrace=False)
