"""The collection hooks of the suites that need something built before they run.

tests/e2e, tests/chaos, tests/gateway and tests/image each mark their tests and build
binaries (the control plane's, Traefik, the image) before the first test, so that a first
build is not cut by a test's timeout. The hooks are the same for all of them; what differs
is declared by each suite's conftest with `register`:

- every test under the suite's folder gets the suite's markers, before `-m` selects on them;
- when any of the suite's tests is to run (not with `--collect-only`), the suite's
  `prepare` runs once, after collection and before the first test, with a `progress`
  callback that prints `[label] message` lines; then its `prepare_selected`, if it has
  one, given the suite's tests that are to run too: for what only some of them need.

This module is a pytest plugin, registered by the repository's conftest.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Suite:
    folder: Path
    markers: tuple[str, ...]
    prepare: Callable[[Progress], None]
    label: str
    prepare_selected: Callable[[Progress, Sequence[pytest.Item]], None] | None = None


_SUITES: dict[Path, Suite] = {}


def register(
    folder: Path,
    markers: Sequence[str],
    prepare: Callable[[Progress], None],
    *,
    label: str = "dev tools",
    prepare_selected: Callable[[Progress, Sequence[pytest.Item]], None] | None = None,
) -> None:
    """Declare a suite: the tests under `folder` get `markers`; `prepare` runs before them,
    then `prepare_selected` (given the suite's tests that are to run)."""
    _SUITES[folder] = Suite(folder, tuple(markers), prepare, label, prepare_selected)


def _in_suite(item: pytest.Item, suite: Suite) -> bool:
    return suite.folder in Path(str(item.path)).parents


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for suite in _SUITES.values():
        marks = [getattr(pytest.mark, name) for name in suite.markers]
        for item in items:
            if _in_suite(item, suite):
                for mark in marks:
                    item.add_marker(mark)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for suite in _SUITES.values():
        selected = [item for item in session.items if _in_suite(item, suite)]
        if not selected:
            continue

        def progress(message: str, label: str = suite.label) -> None:
            if reporter is not None:
                reporter.write_line(f"[{label}] {message}")
            else:
                print(f"[{label}] {message}", file=sys.stderr, flush=True)

        suite.prepare(progress)
        if suite.prepare_selected is not None:
            suite.prepare_selected(progress, selected)
