"""The chaos suite: faults made on purpose on a local control plane of its own, one per test.

Every test here is marked `chaos` (and runs with the rest under `make test`). Each test
starts its own etcd and kube-apiserver, because it kills them. Figures (recovery times,
events lost, violations) are recorded with the `figure` fixture and printed at the end of
the run under "chaos figures".

- `plane`: a fresh `LocalControlPlane` for one test, on tests/plane_fixtures.py's `tools`.
- `fleet`: that plane, a namespace, two reporters on loopback, N routed services (N given
  by `fleet.route(n)`), a `MapRecorder`, and the controller processes the test starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from fleet import Fleet
from tests.plane_fixtures import prepare_tools
from tests.plane_fixtures import tools as tools
from tests.suite_hooks import register

from ome_routing_dev.devcluster import LocalControlPlane, Tools

CHAOS_DIR = Path(__file__).parent
_FIGURES: list[tuple[str, str, str]] = []


# the chaos suite prints no progress while the binaries build
register(CHAOS_DIR, ["chaos"], lambda _progress: prepare_tools())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("chaos figures")
    for test, name, value in _FIGURES:
        terminalreporter.write_line(f"{test}: {name} = {value}")


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """Record one figure of this test, e.g. `figure("recovery after restart (s)", 3.2)`."""

    def record(name: str, value: object) -> None:
        text = f"{value:.2f}" if isinstance(value, float) else str(value)
        _FIGURES.append((request.node.name, name, text))
        request.node.user_properties.append((name, text))

    return record


@pytest.fixture
def apiserver_flags() -> tuple[str, ...]:
    """Extra kube-apiserver flags; a test module overrides this fixture to change them."""
    return ()


@pytest.fixture
def plane(
    tmp_path: Path, apiserver_flags: tuple[str, ...], tools: Tools
) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(
        tmp_path / "plane", tools=tools, apiserver_flags=apiserver_flags
    ) as started:
        yield started


@pytest.fixture
async def fleet(plane: LocalControlPlane, tmp_path: Path) -> AsyncIterator[Fleet]:
    world = Fleet(plane, tmp_path)
    await world.open()
    try:
        yield world
    finally:
        await world.close()
