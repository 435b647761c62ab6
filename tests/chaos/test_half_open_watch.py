"""A half-open watch, and what /readyz and /healthz say about the API side.

The controller reaches kube-apiserver through a `relay.Relay`. `stall()` makes every
connection open at that moment half-open (no byte passes either way, none is closed: a
NAT or load balancer that dropped the flow), while new connections pass. The watches
then bring nothing; with leader election on the chart's timings, the Lease keeps being
renewed on fresh connections, so only the watch's own idle bound (`--watch-idle-timeout`)
can notice. A placement change made during the stall must reach its map through the list
that follows. Before the bound existed, nothing noticed: the map never changed.

The probes: `/readyz` fails while the first list is held back (the link is cut before the
controller starts) and passes once it comes; `/healthz` fails once the watches have been
silent past their bound and listing fails too (the link cut under a running controller),
and passes again when the link heals.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import pytest
from controller_harness import PATIENCE, ControllerProcess, eventually
from fleet import ADMITTED, Fleet
from invariants import entries
from relay import Relay, kubeconfig_through
from test_watches import set_ready

pytestmark = pytest.mark.timeout(300)

#: the idle bound of the controller's watches here (2m30s by default)
IDLE = 8.0
#: the chart's Lease timings: a renewal stuck on a stalled connection times out (10 s) and
#: the next one, on a new connection, lands well inside the renew deadline
CHART_TIMING = (
    "--leader-elect-lease-duration=60s",
    "--leader-elect-renew-deadline=40s",
    "--leader-elect-retry-period=8s",
)
Figure = Callable[[str, object], None]


@pytest.fixture
async def link(fleet: Fleet) -> AsyncIterator[Relay]:
    relay = await Relay(("127.0.0.1", fleet.plane.ports["kube-apiserver"]), "127.0.0.2").start()
    try:
        yield relay
    finally:
        relay.heal()
        await relay.close()


async def through(fleet: Fleet, link: Relay, *args: str, wait: bool = True) -> ControllerProcess:
    kubeconfig = kubeconfig_through(
        fleet.plane.kubeconfig, link, fleet.workdir / "kubeconfig-relay"
    )
    return await fleet.start_controller(
        "replica", wait=wait, kubeconfig=kubeconfig, args=(f"--watch-idle-timeout={IDLE:g}s", *args)
    )


def ready_of(fleet: Fleet, name: str) -> object:
    tmap = fleet.recorder.maps.get(name) or {}
    return (entries(tmap).get("worker-a") or {}).get("capacity", {}).get("ready")


async def test_a_change_made_while_the_watches_are_half_open_reaches_its_map_after_the_idle_bound(
    fleet: Fleet, link: Relay, figure: Figure
) -> None:
    await fleet.route(3)
    replica = await through(fleet, link, *CHART_TIMING)
    await fleet.until_correct()
    name = fleet.services[0]
    assert ready_of(fleet, name) == ADMITTED
    silent_before = replica.log.count("nothing, not even a bookmark")

    stalled = link.stall()
    figure("connections stalled", stalled)
    assert stalled >= 2, "at least the two watches were open"
    changed = time.monotonic()
    await set_ready(fleet, name, 1)

    async def applied() -> bool:
        return ready_of(fleet, name) == 1

    await eventually(applied, IDLE + PATIENCE, "the change made during the stall to reach its map")
    figure("idle bound (s)", IDLE)
    figure("change during the stall to its map (s)", time.monotonic() - changed)
    assert replica.log.count("nothing, not even a bookmark") > silent_before, (
        "the change came by a list after a silent watch"
    )
    assert await fleet.lease_holder() == "replica", "the replica kept the Lease throughout"
    assert replica.process is not None and replica.process.poll() is None
    assert fleet.recorder.violations == []


async def test_readyz_fails_until_the_first_list_and_then_passes(fleet: Fleet, link: Relay) -> None:
    await fleet.route(1)
    link.cut()  # held from the start: the first list cannot happen
    replica = await through(fleet, link, "--no-leader-elect", wait=False)
    status, body = await replica.get_probe("/readyz")
    assert (status, body) == (
        500,
        "[+]leader-election ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n",
    )
    assert await replica.get_probe("/healthz") == (200, "ok"), "never listed: not dead"
    assert "controller started" not in replica.log
    link.heal()

    async def ready() -> bool:
        return await replica.get_probe("/readyz") == (200, "ok")

    await eventually(ready, PATIENCE, "/readyz once the caches have listed")
    await fleet.until_correct()


async def test_healthz_fails_when_the_watches_are_dead_and_listing_fails(
    fleet: Fleet, link: Relay, figure: Figure
) -> None:
    await fleet.route(1)
    replica = await through(fleet, link, "--no-leader-elect")
    assert await replica.get_probe("/healthz") == (200, "ok")
    cut = time.monotonic()
    link.cut()  # open connections and new ones alike: watches and lists both fail

    async def unhealthy() -> tuple[int, str] | None:
        answer = await replica.get_probe("/healthz")
        return answer if answer[0] != 200 else None

    status, body = await eventually(unhealthy, IDLE + PATIENCE, "/healthz to fail")
    figure("link cut to /healthz failing (s)", time.monotonic() - cut)
    assert (status, body) == (500, "[-]watches failed: reason withheld\nhealthz check failed\n")
    assert "watches check failed" in replica.log
    link.heal()

    async def healthy() -> bool:
        return await replica.get_probe("/healthz") == (200, "ok")

    await eventually(healthy, PATIENCE, "/healthz once listing works again")


async def test_a_standby_is_ready_while_it_can_read_the_lease(fleet: Fleet, link: Relay) -> None:
    leader = await fleet.start_controller("leader")
    standby = await through(fleet, link, wait=False)

    async def ready() -> bool:
        return await standby.get_probe("/readyz") == (200, "ok")

    await eventually(ready, PATIENCE, "the standby's /readyz")
    assert await fleet.lease_holder() == "leader"
    link.cut()

    async def not_ready() -> tuple[int, str] | None:
        answer = await standby.get_probe("/readyz")
        return answer if answer[0] != 200 else None

    assert await eventually(not_ready, PATIENCE, "the cut-off standby's /readyz to fail") == (
        500,
        "[-]leader-election failed: reason withheld\nreadyz check failed\n",
    )
    link.heal()
    await eventually(ready, PATIENCE, "the standby's /readyz once it reads the Lease again")
    assert leader.process is not None and leader.process.poll() is None
