"""Leadership under faults: a graceful stop hands over at once, a crash within the Lease's term.

Two controller processes share one Lease; reporters flap so that the leader is writing
maps all the time when it is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Callable

import pytest
from controller_harness import eventually
from fleet import Fleet
from invariants import half_written

from ome_routing.kube.resources import TrafficMap

pytestmark = pytest.mark.timeout(300)

SERVICES = 60
#: client-go's defaults, which the controller uses: Lease duration and retry period
LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0
START_OVER = ("no capacity report yet", "capacity report awaiting quorum")


@contextlib.asynccontextmanager
async def flapping(fleet: Fleet) -> AsyncIterator[None]:
    """worker-a's count flips between 1 and 2 so that every map is rewritten every poll."""
    fleet.recorder.rises_allowed = True
    reporter = fleet.reporters["worker-a"]

    async def flip() -> None:
        while True:
            reporter.servable = 3 - reporter.servable
            await asyncio.sleep(0.4)

    task = asyncio.create_task(flip())
    try:
        await eventually(
            lambda: _true(len(fleet.recorder.writes_since(time.monotonic() - 2)) >= SERVICES),
            60,
            "the leader to be writing maps all the time",
        )
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # A count the flapping never wrote: every map must change under the new leader.
        # With 1 or 2, a map whose homes reach quorum again before the new leader first
        # reconciles it already holds the new leader's state, and rightly gets no write.
        reporter.servable = 3


async def _true(value: bool) -> bool:
    return value


async def leader_and_standby(fleet: Fleet) -> None:
    await fleet.route(SERVICES)
    await fleet.start_controller("leader")
    await fleet.start_controller("standby", wait=False)
    await fleet.until_correct()
    assert await fleet.lease_holder() == "leader"


async def every_map_rewritten_since(fleet: Fleet, moment: float) -> None:
    """Wait until the new leader has written every map (it starts every home over)."""

    def missing() -> set[str]:
        return set(fleet.services) - {w.name for w in fleet.recorder.writes_since(moment)}

    try:
        await eventually(lambda: _true(not missing()), 60, "the new leader to write every map")
    except AssertionError as err:
        gone = sorted(missing())
        last = [
            (round(w.at - moment, 2), w.name, w.reasons)
            for w in fleet.recorder.writes
            if w.name in gone
        ][-4:]
        raise AssertionError(f"{err}; not written: {gone}; their last writes: {last}") from None


async def half_written_maps(fleet: Fleet) -> list[str]:
    found = []
    async for tmap in fleet.client.list(TrafficMap, namespace="chaos"):
        raw = tmap.to_dict()
        if half_written(raw):
            found.append(raw["metadata"]["name"])
    return found


async def test_sigterm_releases_the_lease_at_once_and_leaves_every_map_whole(
    fleet: Fleet, figure: Callable[[str, object], None]
) -> None:
    await leader_and_standby(fleet)
    leader, standby = fleet.controllers
    assert leader.process is not None and standby.process is not None
    async with flapping(fleet):
        # The standby holds still, so that what the leader leaves behind can be looked at.
        standby.process.send_signal(signal.SIGSTOP)
        stopping = time.monotonic()
        leader.process.send_signal(signal.SIGTERM)
        assert await leader.wait_exit() == 0
        figure("SIGTERM to exit (s)", time.monotonic() - stopping)
    assert await fleet.lease_holder() in (None, ""), "the Lease must be released on SIGTERM"
    half = await half_written_maps(fleet)
    assert half == [], (
        f"half-written {half}; the leader's last lines on them, then its last lines:\n"
        + "\n".join(
            [line for line in leader.log.splitlines() if any(name in line for name in half)][-8:]
            + leader.log.splitlines()[-12:]
        )
    )

    resumed = time.monotonic()
    standby.process.send_signal(signal.SIGCONT)
    await eventually(
        lambda: _holder_is(fleet, "standby"), 60, "the standby to take the released Lease"
    )
    figure("released Lease to standby leading (s)", time.monotonic() - resumed)
    await every_map_rewritten_since(fleet, resumed)
    correct = await fleet.until_correct()
    figure("released Lease to every map correct again (s)", correct - resumed)
    assert fleet.recorder.violations == []
    figure("invariant violations", len(fleet.recorder.violations))


async def test_a_leader_killed_mid_write_is_replaced_and_no_map_stays_half_written(
    fleet: Fleet, figure: Callable[[str, object], None]
) -> None:
    await leader_and_standby(fleet)
    leader = fleet.controllers[0]
    assert leader.process is not None
    async with flapping(fleet):
        killed = time.monotonic()
        leader.process.send_signal(signal.SIGKILL)
        await leader.wait_exit()
        taken = await standby_leading_since(fleet, killed, LEASE_DURATION + RETRY_PERIOD + 30)
        figure("SIGKILL to standby leading (s)", taken - killed)
        figure("Lease duration + retry period (s)", LEASE_DURATION + RETRY_PERIOD)
    await every_map_rewritten_since(fleet, taken)
    correct = await fleet.until_correct()
    figure("standby leading to every map correct (s)", correct - taken)
    after = [w for w in fleet.recorder.writes if w.at >= taken]
    assert any(reason.startswith(START_OVER) for w in after for reason in w.reasons), (
        "the new leader must start every home over"
    )
    assert await fleet.quiet_writes(5) == 0, "at rest the controller writes nothing"
    assert await half_written_maps(fleet) == []
    assert fleet.recorder.violations == []
    figure("invariant violations", len(fleet.recorder.violations))


async def standby_leading_since(fleet: Fleet, before: float, timeout: float) -> float:
    """Wait for the standby to hold the Lease; return a moment before its first write.

    That is when the last read that still found another holder was sent (at first
    `before`, the moment the old leader went): the standby acquired the Lease after that
    read was served, so none of its writes is older. The moment the new holder is first
    seen would be too late: under load the new leader can write some maps before the
    test's next read of the Lease.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        asked = time.monotonic()
        if await _holder_is(fleet, "standby"):
            return before
        before = asked
        await asyncio.sleep(0.25)
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for the standby to take the Lease"
    )


async def _holder_is(fleet: Fleet, identity: str) -> bool:
    with contextlib.suppress(Exception):
        return await fleet.lease_holder() == identity
    return False
