"""The shards suite: sharded replicas (`--sharding`) under faults at scale, one control
plane per test.

It runs on tests/chaos's world, not a copy of it: that folder is put on sys.path here (as
the repository's conftest.py puts tests/e2e's helpers there), so `fleet`, `audit`,
`relay`, `invariants`, `published` and `fencing_world` are the same modules the chaos
suite uses. Every test is marked `chaos` (faults made on purpose, each on a control plane
of its own, whose API server keeps an audit log of every write: `audit.audit_flags`).
Figures are printed at the end of the run under "shard figures".

- `plane`: a fresh `LocalControlPlane` for one test, recording the audit log.
- `fleet`: that plane, the namespace `chaos`, two reporters on loopback and a
  `MapRecorder` (tests/chaos/fleet.py).
- `world`: a `ShardWorld` (shard_world.py) on that fleet: replicas through relays of
  their own, the Leases, the audit log.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

SHARDS_DIR = Path(__file__).parent
_CHAOS = str(SHARDS_DIR.parent / "chaos")
if _CHAOS not in sys.path:
    sys.path.append(_CHAOS)

from audit import audit_flags  # noqa: E402
from fleet import Fleet  # noqa: E402
from shard_world import ShardWorld  # noqa: E402
from tests.plane_fixtures import prepare_tools  # noqa: E402
from tests.plane_fixtures import tools as tools  # noqa: E402
from tests.suite_hooks import register  # noqa: E402

from ome_routing_dev.devcluster import LocalControlPlane, Tools  # noqa: E402

_FIGURES: list[tuple[str, str, str]] = []

register(SHARDS_DIR, ["chaos"], lambda _progress: prepare_tools())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("shard figures")
    for test, name, value in _FIGURES:
        terminalreporter.write_line(f"{test}: {name} = {value}")


@pytest.fixture
def figure(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """Record one figure of this test, e.g. `figure("SIGKILL to every shard held (s)", 9.1)`."""

    def record(name: str, value: object) -> None:
        text = f"{value:.2f}" if isinstance(value, float) else str(value)
        _FIGURES.append((request.node.name, name, text))
        request.node.user_properties.append((name, text))

    return record


@pytest.fixture
def audit_log(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "audit.log"


@pytest.fixture
def plane(tmp_path: Path, audit_log: Path, tools: Tools) -> Iterator[LocalControlPlane]:
    flags = audit_flags(audit_log.parent)
    with LocalControlPlane(tmp_path / "plane", tools=tools, apiserver_flags=flags) as started:
        yield started


@pytest.fixture
async def fleet(plane: LocalControlPlane, tmp_path: Path) -> AsyncIterator[Fleet]:
    world = Fleet(plane, tmp_path)
    await world.open()
    try:
        yield world
    finally:
        await world.close()


@pytest.fixture
async def world(fleet: Fleet, audit_log: Path) -> AsyncIterator[ShardWorld]:
    shards = ShardWorld(fleet, audit_log)
    try:
        yield shards
    finally:
        await shards.close()
