"""The docs' `<!-- doc-test: run control-plane -->` blocks exit 0 on the local control plane.

One test per block (id `file:line`), as `run` blocks run, with KUBECONFIG of the session's
control plane and kubectl and helm on PATH. A block cleans up after itself or works in a
namespace of its own.
"""

from __future__ import annotations

import pytest
from doc_checks import Doc, blocks_marked, check_block
from markdown_blocks import Fence

BLOCKS = blocks_marked("run control-plane")


@pytest.mark.parametrize(
    ("doc", "fence"), BLOCKS, ids=[f"{doc.label}:{fence.line}" for doc, fence in BLOCKS]
)
def test_control_plane_block_exits_zero(
    doc: Doc, fence: Fence, control_plane_block_env: dict[str, str]
) -> None:
    check_block(doc, fence, control_plane_block_env)
