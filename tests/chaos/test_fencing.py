"""Fencing: a leader that lost its Lease writes nothing, after a freeze or a partition.

Two replicas share one Lease with the publisher on, and the leader is writing every map
and route all the time (a reporter flaps). Then the leader is frozen (SIGSTOP) for longer
than the Lease and woken, or cut from the API server (its `relay.Relay` stops, while it
still reaches the reporters) until the standby has taken over, and the link comes back.
Every write is seen by a watch (`fleet.recorder` for the TrafficMaps,
`published.PublishedRecorder` for the routes, Services and slices) and matched to the
replica that made it through the API server's audit log (`audit`): after the standby's
first write, none may be the old leader's. The old leader must step down and exit with
`leader election lost`, as OME's manager; in the partition it is then started again, as
Kubernetes would, and writes nothing while the standby holds the Lease.

Requests that the old leader sent as the link went down are delivered when it comes back
(as TCP delivers them after a partition heals): each carries the resourceVersion it was
computed from, and the API server refuses it (counted as "refused").
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from audit import audit_flags
from controller_harness import eventually
from fencing_world import Account, Figure, Pair
from fleet import Fleet

pytestmark = pytest.mark.timeout(300)

SERVICES = 6
#: short Lease timings, so that a takeover takes seconds: the lease, the renew deadline and
#: the retry period (OME's flags; a standby takes over after at most LEASE + 2.2 * RETRY,
#: its retries jittered as client-go's)
LEASE, RENEW, RETRY = 8.0, 5.0, 1.0
TIMING = (
    f"--leader-elect-lease-duration={LEASE:g}s",
    f"--leader-elect-renew-deadline={RENEW:g}s",
    f"--leader-elect-retry-period={RETRY:g}s",
)


@pytest.fixture
def apiserver_flags(tmp_path: Path) -> tuple[str, ...]:
    return audit_flags(tmp_path / "audit")


@pytest.fixture
async def pair(fleet: Fleet, tmp_path: Path) -> AsyncIterator[Pair]:
    world = Pair(fleet, tmp_path / "audit" / "audit.log", SERVICES, TIMING)
    try:
        await world.start()
        yield world
    finally:
        await world.close()


def check(account: Account, name: str, figure: Figure) -> None:
    account.record(name, figure)
    assert account.old_last is not None, "the old leader wrote nothing before the fault"
    assert account.standby_first is not None, "the standby never wrote"
    assert account.watched_after, "the watches saw nothing after the standby's first write"
    assert account.watched_by_old == [], (
        f"the watches saw the old leader's writes: {account.watched_by_old}"
    )
    assert account.watched_unknown == [], (
        f"changes no request accounts for: {account.watched_unknown}"
    )
    late = [str(r) for r in account.old_after_standby]
    assert late == [], f"the old leader wrote after the standby's first write: {late}"


async def test_a_leader_frozen_past_its_lease_writes_nothing_when_woken(
    pair: Pair, figure: Figure
) -> None:
    old = pair.old
    assert old is not None and old.process is not None
    async with pair.flapping():
        fault = time.time()
        old.process.send_signal(signal.SIGSTOP)
        await pair.standby_rewrote_everything(fault)
        old.process.send_signal(signal.SIGCONT)
        code = await pair.exit_of(old, timeout=30)
    await pair.settle()
    account = pair.account(fault)
    check(account, "freeze", figure)
    assert code == 1, f"the woken leader must exit (code {code}):\n{old.log[-3000:]}"
    assert "leader election lost" in old.log
    figure("freeze: why the old leader stepped down", step_down_reason(old.log))


async def test_a_partitioned_leader_stops_at_its_deadline_and_writes_nothing_after_it(
    pair: Pair, figure: Figure
) -> None:
    old, link = pair.old, pair.old_link
    assert old is not None and old.process is not None and link is not None
    async with pair.flapping():
        fault = time.time()
        link.cut()  # the reporters are still reached: only the API server is gone
        code = await pair.exit_of(old, timeout=LEASE + 30)
        if code is not None:
            figure("partition: fault to old leader's exit (s)", time.time() - fault)
        await pair.standby_rewrote_everything(fault)
        link.heal()
        # what the old leader sent as the link went down is delivered now; and it starts
        # again, as Kubernetes restarts it, through the same link
        if old.process.poll() is not None:
            old.start()
            await eventually(
                lambda: _logged(old.log, "serving /metrics", 2), 60, "the old leader to restart"
            )
        observed = time.time()
        await eventually(lambda: _later(observed + 3 * RETRY), 30, "a few retry periods")
        assert await pair.fleet.lease_holder() == "standby"
    await pair.settle()
    account = pair.account(fault)
    check(account, "partition", figure)
    assert code == 1, f"the partitioned leader must exit (code {code}):\n{old.log[-3000:]}"
    assert "leader election lost" in old.log
    figure("partition: why the old leader stepped down", step_down_reason(old.log))


def step_down_reason(log: str) -> str:
    found = re.search(r'lost leadership\t.*"reason": "([^"]*)"', log)
    assert found is not None, f"the old leader did not log why it stepped down:\n{log[-3000:]}"
    return found.group(1)


async def _logged(log: str, line: str, times: int) -> bool:
    return log.count(line) >= times


async def _later(moment: float) -> bool:
    return time.time() >= moment
