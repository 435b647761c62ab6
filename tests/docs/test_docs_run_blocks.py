"""The docs' `<!-- doc-test: run -->` shell blocks exit 0 (one test per block, id `file:line`).

Each runs with `bash -euo pipefail` from the repository's root, with the virtualenv's bin
first on PATH and no KUBECONFIG, and is ended after 120 s.
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
    if fence.is_shell and marker_kind(fence) == "run"
]


@pytest.mark.parametrize(
    ("doc", "fence"), BLOCKS, ids=[f"{doc.label}:{fence.line}" for doc, fence in BLOCKS]
)
def test_run_block_exits_zero(doc: Doc, fence: Fence, block_env: dict[str, str]) -> None:
    run = run_block(block_script(fence), cwd=REPO_ROOT, env=block_env)
    if run.returncode != 0:
        pytest.fail(describe_failure(doc.label, fence, run), pytrace=False)
