"""The elector as the write gate: a replica writes only inside its renew deadline.

The deadline is judged on a clock the test moves (standing in for `time.monotonic()`,
which goes on counting while a process is stopped), from the moment the last successful
renewal was sent. The Lease API is a fake that keeps one Lease; the retry period is short
so that the renewal loop turns quickly, while the deadline moves only with the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta, Status
from lightkube.resources.coordination_v1 import Lease

from ome_routing.kube.fencing import NotLeader
from ome_routing.kube.leader import ElectionSettings, LeaderElector, LeadershipLost, jittered

pytestmark = pytest.mark.timeout(30)

#: lease 15 s, renew deadline 10 s on the test's clock; the loop retries every 20 ms
SETTINGS = ElectionSettings(lease_duration=15.0, renew_deadline=10.0, retry_period=0.02)


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeLeases:
    """One Lease, as the API server would keep it (resourceVersion included)."""

    clock: Clock
    lease: Lease | None = None
    #: seconds the clock moves while a request is on its way (a slow API server)
    latency: float = 0.0
    #: every request, in order: ("get" | "create" | "replace", holder written)
    calls: list[tuple[str, str | None]] = field(default_factory=list)
    away: bool = False
    version: int = 0

    async def get(self, _resource: Any, name: str, *, namespace: str) -> Lease:
        self.calls.append(("get", None))
        self.clock.now += self.latency
        await asyncio.sleep(0)
        if self.away:
            raise ConnectionError("the API server is away")
        if self.lease is None:
            raise ApiError(status=Status(code=404, message=f'leases "{name}" not found'))
        return Lease.from_dict(self.lease.to_dict())

    async def create(self, lease: Lease) -> Lease:
        return self._store("create", lease)

    async def replace(self, lease: Lease) -> Lease:
        assert self.lease is not None and lease.metadata is not None
        stored = self.lease.metadata.resourceVersion if self.lease.metadata else None
        if lease.metadata.resourceVersion != stored:
            raise ApiError(status=Status(code=409, message="the object has been modified"))
        return self._store("replace", lease)

    def _store(self, verb: str, lease: Lease) -> Lease:
        if self.away:
            raise ConnectionError("the API server is away")
        self.version += 1
        stored = Lease.from_dict(lease.to_dict())
        assert stored.metadata is not None and stored.spec is not None
        stored.metadata.resourceVersion = str(self.version)
        self.lease = stored
        self.calls.append((verb, stored.spec.holderIdentity))
        return stored

    def taken_by(self, holder: str) -> None:
        """Another replica writes the Lease."""
        assert self.lease is not None and self.lease.spec is not None
        self.lease.spec.holderIdentity = holder
        self.lease.spec.renewTime = datetime.now(UTC)
        self._store("replace", self.lease)

    def writes(self) -> list[tuple[str, str | None]]:
        return [c for c in self.calls if c[0] != "get"]


@dataclass
class Leading:
    """A `lead` coroutine that writes on request through the elector's gate."""

    elector: LeaderElector
    started: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)
    written: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    hold: Callable[[], Awaitable[None]] | None = None

    async def __call__(self) -> None:
        self.started.set()
        while True:
            await self.go.wait()
            self.go.clear()
            # as the controller's workers: a reconcile that has begun finishes when cancelled
            reconcile = asyncio.ensure_future(self._reconcile())
            try:
                await asyncio.shield(reconcile)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await reconcile
                raise

    async def _reconcile(self) -> None:
        if self.hold is not None:
            await self.hold()
        try:
            self.elector.check_write("PATCH /apis/ome.io/v1beta1/trafficmaps/chat")
        except NotLeader:
            self.refused.append("PATCH")
            raise
        self.written.append("PATCH")


@contextlib.asynccontextmanager
async def running(
    leases: FakeLeases, clock: Clock
) -> AsyncIterator[tuple[LeaderElector, Leading, asyncio.Task[None]]]:
    elector = LeaderElector(
        leases,  # type: ignore[arg-type]
        namespace="ome",
        name="ome-routing-controller",
        identity="me",
        settings=SETTINGS,
        clock=clock,
    )
    lead = Leading(elector)
    task = asyncio.create_task(elector.run(lead))
    await asyncio.wait_for(lead.started.wait(), 5)
    try:
        yield elector, lead, task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await task


async def write(lead: Leading) -> None:
    before = len(lead.written) + len(lead.refused)
    lead.go.set()
    while len(lead.written) + len(lead.refused) == before:
        await asyncio.sleep(0.001)


async def test_inside_the_deadline_the_leader_writes() -> None:
    clock = Clock()
    leases = FakeLeases(clock)
    async with running(leases, clock) as (elector, lead, _):
        await write(lead)
        assert lead.written == ["PATCH"]
        assert elector.may_write()


async def test_a_replica_woken_past_its_deadline_refuses_its_first_write_and_steps_down() -> None:
    """As after SIGSTOP: the clock went on, no renewal ran, and the work wakes first."""
    clock = Clock()
    leases = FakeLeases(clock)
    async with running(leases, clock) as (elector, lead, task):
        await write(lead)
        lease_writes = len(leases.writes())
        clock.now += SETTINGS.lease_duration + 5  # stopped for longer than the Lease
        lead.go.set()
        with pytest.raises(LeadershipLost, match="renew deadline passed"):
            await asyncio.wait_for(task, 5)
        assert lead.written == ["PATCH"] and lead.refused == ["PATCH"]
        assert not elector.may_write()
        # stepping down touched the Lease no more: no renewal, no release
        assert len(leases.writes()) == lease_writes


async def test_the_deadline_counts_from_when_the_last_renewal_was_sent() -> None:
    """A slow answer does not extend the deadline: it runs from before the Lease was read."""
    clock = Clock()
    leases = FakeLeases(clock, latency=4.0)
    async with running(leases, clock) as (elector, _, _):
        sent = 1000.0  # the clock when the acquisition was sent; it answered 4 s later
        leases.away, leases.latency = True, 0.0  # no renewal succeeds from here on
        assert clock.now == sent + 4.0
        clock.now = sent + SETTINGS.renew_deadline - 0.001
        assert elector.may_write()
        clock.now = sent + SETTINGS.renew_deadline
        assert not elector.may_write()
        with pytest.raises(NotLeader):
            elector.check_write("PUT /api/v1/namespaces/chat/services/chat-worker-a")


async def test_each_successful_renewal_moves_the_deadline() -> None:
    clock = Clock()
    leases = FakeLeases(clock)
    async with running(leases, clock) as (elector, lead, _):
        for _ in range(3):
            renewals = len(leases.writes())
            clock.now += SETTINGS.renew_deadline - 1  # a renewal is due long before this
            while len(leases.writes()) == renewals:
                await asyncio.sleep(0.005)
            assert elector.may_write()
        await write(lead)
        assert lead.written == ["PATCH"]


async def test_a_renewal_that_finds_another_holder_steps_down_before_the_deadline() -> None:
    clock = Clock()
    leases = FakeLeases(clock)
    async with running(leases, clock) as (elector, lead, task):
        leases.taken_by("other")
        with pytest.raises(LeadershipLost, match="held by other"):
            await asyncio.wait_for(task, 5)
        assert not elector.may_write()
        lead.go.set()
        assert leases.lease is not None and leases.lease.spec is not None
        assert leases.lease.spec.holderIdentity == "other", "the Lease is left to its holder"


async def test_with_the_api_away_the_leader_steps_down_at_its_deadline_without_a_write() -> None:
    """As in a partition: nothing writes, and the renewal loop itself gives up in time."""
    clock = Clock()
    leases = FakeLeases(clock)
    async with running(leases, clock) as (elector, _, task):
        leases.away = True
        clock.now += SETTINGS.renew_deadline
        with pytest.raises(LeadershipLost, match="renew deadline passed"):
            await asyncio.wait_for(task, 5)
        assert not elector.may_write()
        with pytest.raises(NotLeader):
            elector.check_read("GET /apis/ome.io/v1beta1/trafficmaps")


async def test_on_shutdown_the_write_in_flight_finishes_before_the_lease_is_released() -> None:
    clock = Clock()
    leases = FakeLeases(clock)
    release_order: list[str] = []
    in_flight = asyncio.Event()
    finish = asyncio.Event()

    async def slow_write() -> None:
        in_flight.set()
        await finish.wait()
        release_order.append("write landed")

    async with running(leases, clock) as (_, lead, task):
        lead.hold = slow_write
        lead.go.set()
        await in_flight.wait()
        task.cancel()
        await asyncio.sleep(0.05)
        assert ("replace", None) not in leases.writes(), "released while a write was in flight"
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        release_order.append("released" if ("replace", None) in leases.writes() else "kept")
    assert lead.written == ["PATCH"]
    assert release_order == ["write landed", "released"]


async def test_a_standby_writes_nothing_until_it_holds_the_lease() -> None:
    clock = Clock()
    leases = FakeLeases(clock)
    leases.lease = Lease(
        metadata=ObjectMeta(name="ome-routing-controller", namespace="ome"),
        spec=LeaseSpec(leaseDurationSeconds=15),
    )
    leases.taken_by("other")
    elector = LeaderElector(
        leases,  # type: ignore[arg-type]
        namespace="ome",
        name="ome-routing-controller",
        identity="me",
        settings=SETTINGS,
        clock=clock,
    )
    lead = Leading(elector)
    task = asyncio.create_task(elector.run(lead))
    try:
        await asyncio.sleep(0.1)  # several attempts: the holder renews as far as we can see
        assert not lead.started.is_set()
        with pytest.raises(NotLeader):
            elector.check_write("POST /apis/ome.io/v1beta1/namespaces/chat/trafficmaps")
        assert [w for w in leases.writes() if w[1] == "me"] == []
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_write_may_take_no_longer_than_the_renew_margin() -> None:
    """The gate's budget: lease 15 s less renew deadline 10 s, even just before the deadline,
    so that a write let through ends before a standby may take the Lease over."""
    clock = Clock()
    async with running(FakeLeases(clock), clock) as (elector, _lead, _task):
        renewed = clock.now  # the renewal that made it leader was sent at this time
        assert elector.check_write("POST /api/v1/namespaces/chat/services") == 5.0
        clock.now = renewed + 9.9
        budget = elector.check_write("POST /api/v1/namespaces/chat/services")
        assert clock.now + budget < renewed + SETTINGS.lease_duration


def test_acquire_retries_are_jittered_as_client_gos() -> None:
    assert jittered(2.0, 0.0) == 2.0
    assert jittered(2.0, 0.5) == pytest.approx(3.2)
    assert jittered(2.0, 0.999) == pytest.approx(2.0 * (1 + 0.999 * 1.2))


async def test_a_standby_draws_a_fresh_jitter_before_each_retry() -> None:
    clock = Clock()
    leases = FakeLeases(clock)
    leases.lease = Lease(
        metadata=ObjectMeta(name="ome-routing-controller", namespace="ome"),
        spec=LeaseSpec(leaseDurationSeconds=15),
    )
    leases.taken_by("other")
    draws: list[float] = []

    def draw() -> float:
        draws.append(0.25)
        return 0.25

    elector = LeaderElector(
        leases,  # type: ignore[arg-type]
        namespace="ome",
        name="ome-routing-controller",
        identity="me",
        settings=SETTINGS,
        clock=clock,
        draw=draw,
    )
    task = asyncio.create_task(elector.run(Leading(elector)))
    try:
        while sum(1 for c in leases.calls if c[0] == "get") < 3:
            await asyncio.sleep(0.005)
        # a draw between each two attempts
        assert len(draws) >= 2
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
