"""The control plane goes away under the controller: kube-apiserver and etcd SIGKILLed.

Each outage lowers a reporter's count while the API cannot take writes; after the process
is back, the figure is the time until every map follows the reporters again. The recorder
checks every write meanwhile; a map of another owner stands among them and is never written.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from fleet import Fleet

from ome_routing_dev.devcluster import faults

pytestmark = pytest.mark.timeout(420)

SERVICES = 20
OUTAGE = 4.0  # seconds the process stays down: polls go on meanwhile
#: the chart's Lease timings: a leader that cannot renew for its renew deadline (40 s)
#: exits, as OME's; an outage shorter than that must not end it
CHART_TIMING = (
    "--leader-elect-lease-duration=60s",
    "--leader-elect-renew-deadline=40s",
    "--leader-elect-retry-period=8s",
)


async def outage(
    fleet: Fleet, process: str, lower: str, figure: Callable[[str, object], None], round: int
) -> None:
    """Kill `process`, lower reporter `lower` by one while it is down, restart it, measure."""
    polls_before = sum(r.requests for r in fleet.reporters.values())
    await asyncio.to_thread(faults.kill, fleet.plane, process)
    fleet.reporters[lower].servable -= 1
    await asyncio.sleep(OUTAGE)
    polled = sum(r.requests for r in fleet.reporters.values()) - polls_before
    await asyncio.to_thread(faults.restart, fleet.plane, process)
    back = time.monotonic()
    correct = await fleet.until_correct()
    figure(f"{process} back to every map correct, round {round} (s)", correct - back)
    figure(f"polls while {process} was down, round {round}", polled)
    assert polled > 0, f"the controller must go on polling while {process} is down"
    leader = fleet.controllers[0]
    assert leader.process is not None and leader.process.poll() is None, (
        f"the controller must not exit when {process} goes away:\n{leader.log}"
    )


async def converged_fleet(fleet: Fleet) -> None:
    await fleet.route(SERVICES)
    await fleet.foreign_map()
    await fleet.start_controller("leader", args=CHART_TIMING)
    await fleet.until_correct()


async def at_rest_and_clean(fleet: Fleet, figure: Callable[[str, object], None]) -> None:
    writes = await fleet.quiet_writes(5)
    figure("writes at rest over 5 s", writes)
    figure("invariant violations", len(fleet.recorder.violations))
    assert writes == 0, "at rest the controller writes nothing"
    assert fleet.recorder.violations == []


async def test_kube_apiserver_killed_twice_the_maps_follow_again(
    fleet: Fleet, figure: Callable[[str, object], None]
) -> None:
    await converged_fleet(fleet)
    await outage(fleet, "kube-apiserver", "worker-b", figure, 1)
    await outage(fleet, "kube-apiserver", "worker-a", figure, 2)
    await at_rest_and_clean(fleet, figure)


async def test_etcd_killed_the_maps_follow_again(
    fleet: Fleet, figure: Callable[[str, object], None]
) -> None:
    await converged_fleet(fleet)
    await outage(fleet, "etcd", "worker-b", figure, 1)
    await at_rest_and_clean(fleet, figure)
