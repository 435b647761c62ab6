"""The docs' `<!-- doc-test: run -->` shell blocks exit 0 (one test per block, id `file:line`).

Each runs with `bash -euo pipefail` from the repository's root, with the virtualenv's bin
first on PATH and no KUBECONFIG, and is ended after 120 s.
"""

from __future__ import annotations

import pytest
from doc_checks import Doc, blocks_marked, check_block
from markdown_blocks import Fence

BLOCKS = blocks_marked("run")


@pytest.mark.parametrize(
    ("doc", "fence"), BLOCKS, ids=[f"{doc.label}:{fence.line}" for doc, fence in BLOCKS]
)
def test_run_block_exits_zero(doc: Doc, fence: Fence, block_env: dict[str, str]) -> None:
    check_block(doc, fence, block_env)
