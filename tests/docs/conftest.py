"""The docs suite: README.md and docs/**/*.md checked against the project (tests/docs).

Every test here is marked `docs`. Shell blocks marked `<!-- doc-test: run -->` run here;
those marked `run control-plane` run in `control_plane/`, on a local control plane (marked
`e2e` too). The parser and the checks have unit tests of their own, over the Markdown of
`fixtures/`.

- `block_env` (session): a `run` block's environment (`doc_checks.block_environment`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from doc_checks import block_environment
from tests.suite_hooks import register

DOCS_DIR = Path(__file__).parent

register(DOCS_DIR, ["docs"], lambda progress: None, label="docs")


@pytest.fixture(scope="session")
def block_env() -> dict[str, str]:
    return block_environment(os.environ)
