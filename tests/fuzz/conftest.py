"""Fuzzing of everything a user or a reporter hands the controller, with hypothesis.

Two profiles: `fuzz-ci` (the default; a bounded count that `make test` runs) and `fuzz`
(large counts, for a long run: `OME_FUZZ_PROFILE=fuzz .venv/bin/pytest tests/fuzz`). They
apply to the tests under tests/fuzz only, through `strategies.profile()`, so the other property tests keep
their own settings. Every test here is marked `fuzz`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FUZZ_DIR = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if FUZZ_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.fuzz)
