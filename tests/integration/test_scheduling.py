"""The observer: one schedule and one window per home, and the verdict changes it reports."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

from ome_routing.core.capacity import NO_REPORT_YET, Verdict, awaiting_quorum_reason
from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.report import FUTURE, stale_reason
from ome_routing.observer import (
    Observer,
    Outcome,
    PollClient,
    PollCounts,
    PollEvent,
    RequestBudget,
)
from ome_routing.observer.observer import WORKER_NAME
from ome_routing.observer.scheduling import advance, first_offset, stable_fraction

from .conftest import NOW, Handler, Reporter, a_report, seconds

pytestmark = pytest.mark.timeout(30)

StartReporter = Callable[[Handler], Awaitable[Reporter]]


def a_policy(
    *,
    period: str = "50ms",
    timeout: str = "1s",
    samples: int = 3,
    quorum: int = 1,
    max_age: str = "30s",
    path: str = "/capacity",
    method: str = "GET",
) -> CapacityPolicy:
    return CapacityPolicy(
        path=path,
        method=method,
        format="Report",
        samples=samples,
        quorum=quorum,
        period=seconds(period),
        timeout=seconds(timeout),
        max_age=seconds(max_age),
    )


def reporting(
    servable: int = 4, *, delay: float = 0.0, observed_at: datetime | None = None
) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        if delay:
            await asyncio.sleep(delay)
        return web.Response(text=json.dumps(a_report(servable, observed_at)))

    return handle


@dataclass
class Watch:
    """An observer under test, with every verdict change it reported."""

    observer: Observer
    budget: RequestBudget
    stats: PollCounts
    changes: asyncio.Queue[tuple[object, Verdict]] = field(default_factory=asyncio.Queue)

    async def next_change(self, timeout: float = 5.0) -> tuple[object, Verdict]:
        return await asyncio.wait_for(self.changes.get(), timeout)

    async def until(self, key: object, wanted: Verdict, timeout: float = 5.0) -> list[Verdict]:
        """Collect the key's verdict changes until `wanted` arrives."""
        seen: list[Verdict] = []
        async with asyncio.timeout(timeout):
            while True:
                changed_key, changed = await self.changes.get()
                if changed_key == key:
                    seen.append(changed)
                    if changed == wanted:
                        return seen


WatchFactory = Callable[..., Awaitable[Watch]]


@pytest.fixture
async def watch() -> AsyncIterator[WatchFactory]:
    """Start an observer; on teardown stop it and check that it left no task behind."""
    made: list[tuple[Observer, PollClient]] = []

    async def start(*, budget: int = 16, clock: Callable[[], datetime] = lambda: NOW) -> Watch:
        requests = RequestBudget(budget)
        client = PollClient(requests, 65536)
        stats = PollCounts()
        queue: asyncio.Queue[tuple[object, Verdict]] = asyncio.Queue()
        observer = Observer(
            client, lambda key, verdict: queue.put_nowait((key, verdict)), clock=clock, stats=stats
        )
        await observer.start()
        made.append((observer, client))
        return Watch(observer, requests, stats, queue)

    yield start
    for observer, client in made:
        await observer.stop()
        await client.close()
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith(WORKER_NAME)] == []


# --- the schedule -------------------------------------------------------------------


def test_first_polls_spread_evenly_over_the_period() -> None:
    offsets = [first_offset(f"ns-{i}/isvc/worker-a", 10.0) for i in range(2000)]
    assert all(0.0 <= offset < 10.0 for offset in offsets)
    per_second = [0] * 10
    for offset in offsets:
        per_second[int(offset)] += 1
    assert min(per_second) > 150 and max(per_second) < 250


@pytest.mark.parametrize(
    ("key", "fraction"),
    [
        (("qwen3-0-6b", "qwen3-0-6b", "worker-a"), 0.3287819458782046),
        ("qwen3-0-6b/qwen3-0-6b/worker-b", 0.1904099705216337),
    ],
)
def test_the_first_poll_offset_is_the_same_in_every_process(key: object, fraction: float) -> None:
    """Pinned values: Python's own `hash` of a string changes between processes."""
    assert stable_fraction(key) == fraction
    assert first_offset(key, 10.0) == fraction * 10.0


@pytest.mark.parametrize(
    ("deadline", "now", "expected"),
    [
        (None, 10.0, 20.0),
        (15.0, 10.0, 15.0),
        (10.0, 10.0, 20.0),
        (10.0, 10.2, 20.0),
        (10.0, 19.9, 20.0),
        (10.0, 20.0, 30.0),
        (10.0, 25.0, 30.0),
        (10.0, 47.5, 50.0),
    ],
    ids=[
        "no deadline yet",
        "deadline still ahead",
        "on time",
        "late within the period",
        "late to the end of the period",
        "late by exactly one period",
        "late by more than a period",
        "late by several periods",
    ],
)
def test_the_next_deadline_advances_to_the_first_period_boundary_after_now(
    deadline: float | None, now: float, expected: float
) -> None:
    assert advance(deadline, now, 10.0) == expected


@dataclass
class Sent:
    """Every finished poll's event, as the observer reports it."""

    events: list[PollEvent] = field(default_factory=list)

    def poll_finished(self, event: PollEvent) -> None:
        self.events.append(event)

    async def first(self, key: object, count: int = 1, timeout: float = 10.0) -> list[PollEvent]:
        """The key's first `count` polls, once they have finished."""
        async with asyncio.timeout(timeout):
            while True:
                mine = [event for event in self.events if event.key == key]
                if len(mine) >= count:
                    return mine[:count]
                await asyncio.sleep(0.01)


def a_key_with_offset(period: float, low: float, high: float) -> str:
    """A key whose spread first poll falls within [low, high) of the period."""
    return next(
        key
        for key in (f"ns/isvc-{i}/worker-a" for i in range(1000))
        if low <= first_offset(key, period) < high
    )


async def test_a_home_added_while_running_is_polled_at_once(reporter: StartReporter) -> None:
    """OME polls a new home at once: its first poll is due when it is added, not spread."""
    server = await reporter(reporting())
    sent = Sent()
    key = a_key_with_offset(30.0, 10.0, 30.0)  # spread, it would wait 10s or more
    async with PollClient(RequestBudget(4), 65536) as client:
        observer = Observer(client, lambda k, v: None, clock=lambda: NOW, stats=sent)
        await observer.start()
        loop = asyncio.get_running_loop()
        before = loop.time()
        observer.set_home(key, server.base, a_policy(period="30s"))
        after = loop.time()
        [first] = await sent.first(key)
        await observer.stop()
    assert before <= first.started <= after
    assert first.outcome is Outcome.OK


async def test_homes_held_at_start_are_spread_over_their_first_period(
    reporter: StartReporter,
) -> None:
    """A restart does not send every poll at once: each first poll has its stable offset."""
    server = await reporter(reporting())
    sent = Sent()
    keys = [a_key_with_offset(1.0, 0.0, 0.3), a_key_with_offset(1.0, 0.6, 0.9)]
    async with PollClient(RequestBudget(4), 65536) as client:
        observer = Observer(client, lambda k, v: None, clock=lambda: NOW, stats=sent)
        for key in keys:
            observer.set_home(key, server.base, a_policy(period="1s"))
        loop = asyncio.get_running_loop()
        before = loop.time()
        await observer.start()
        after = loop.time()
        firsts = [(await sent.first(key))[0] for key in keys]
        await observer.stop()
    for key, first in zip(keys, firsts, strict=True):
        offset = first_offset(key, 1.0)
        assert before + offset <= first.started <= after + offset


async def test_a_poll_that_fell_behind_moves_to_the_next_period_boundary(
    reporter: StartReporter,
) -> None:
    """A poll that waited more than a period for its slot keeps its cadence afterwards.

    One slot; a slow home holds it for 0.5s while a fast home with a 0.2s period is
    due. The fast home's next poll is due on a boundary of its schedule (a whole number
    of periods after its first deadline), not at the moment its late poll ended.
    """
    slow = await reporter(reporting(delay=0.5))
    fast = await reporter(reporting())
    sent = Sent()
    async with PollClient(RequestBudget(1), 65536) as client:
        observer = Observer(client, lambda k, v: None, clock=lambda: NOW, stats=sent)
        await observer.start()
        observer.set_home("slow", slow.base, a_policy(period="30s"))
        observer.set_home("fast", fast.base, a_policy(period="200ms"))
        first, second = await sent.first("fast", 2)
        await observer.stop()
    assert first.waited >= 0.2  # it fell behind by more than a period
    periods = (second.started - first.started) / 0.2
    assert periods >= 2
    assert periods == pytest.approx(round(periods), abs=1e-6)


async def test_a_home_is_never_polled_twice_at_once(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    server = await reporter(reporting(delay=0.12))
    w = await watch()
    w.observer.set_home("a", server.base, a_policy(period="30ms"))
    while len(server.requests) < 4:
        await asyncio.sleep(0.02)
    assert server.most_in_flight == 1


async def test_a_poll_waits_in_the_schedule_while_every_slot_is_taken(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    server = await reporter(reporting(delay=0.2))
    w = await watch(budget=1)
    for key in ("a", "b"):
        w.observer.set_home(key, server.base, a_policy(period="20ms"))
    while w.stats.total < 3:
        await asyncio.sleep(0.02)
    assert server.most_in_flight == 1
    # one slot, polls of 0.2s: a due poll waited for the other's to end, and says so
    assert w.stats.longest_wait >= 0.15


async def hold_every_slot(budget: RequestBudget, release: asyncio.Event) -> None:
    """As probes do: hold every slot of the shared budget until `release` is set."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(budget.limit):
            await stack.enter_async_context(budget.slot())
        await release.wait()


async def test_a_home_due_while_probes_hold_every_slot_waits_in_line_for_one(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    server = await reporter(reporting(2))
    w = await watch(budget=2)
    release = asyncio.Event()
    holder = asyncio.create_task(hold_every_slot(w.budget, release))
    while w.budget.in_use < 2:
        await asyncio.sleep(0.01)
    w.observer.set_home("a", server.base, a_policy(period="1s"))
    await asyncio.sleep(0.3)
    assert server.requests == []
    # the due home waits in its flow's line of the budget, beside the probes
    assert w.budget.waiting == 1
    release.set()
    await w.until("a", Verdict(2, None))
    await holder
    assert w.stats.longest_wait >= 0.25
    assert w.budget.in_use == 0


async def test_a_home_that_becomes_due_while_probes_hold_every_slot_is_still_polled(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    """Nothing was due when the slots were all taken: the schedule's timer still rings."""
    server = await reporter(reporting(2))
    w = await watch(budget=1)
    await w.observer.stop()
    w.observer.set_home("a", server.base, a_policy(period="200ms"))  # spread over 200ms
    release = asyncio.Event()
    holder = asyncio.create_task(hold_every_slot(w.budget, release))
    while w.budget.in_use < 1:
        await asyncio.sleep(0.01)
    await w.observer.start()
    await asyncio.sleep(0.4)
    assert server.requests == []
    release.set()
    await w.until("a", Verdict(2, None))
    await holder


async def test_homes_are_polled_every_period(watch: WatchFactory, reporter: StartReporter) -> None:
    server = await reporter(reporting())
    w = await watch()
    for key in ("a", "b", "c"):
        w.observer.set_home(key, server.base, a_policy(period="50ms"))
    await asyncio.sleep(0.5)
    # three homes for about ten periods each; loose bounds, this is not a timing test
    assert 15 <= len(server.requests) <= 36
    assert w.stats.by_outcome == {Outcome.OK: w.stats.total}


async def test_a_thousand_homes_all_get_ceilings(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    server = await reporter(reporting(servable=2))
    w = await watch()
    keys = [f"ns/isvc-{i}/worker-a" for i in range(1000)]
    for key in keys:
        w.observer.set_home(key, server.base, a_policy(period="500ms"))
    async with asyncio.timeout(20):
        while any(w.observer.verdict(key) != Verdict(2, None) for key in keys):
            await asyncio.sleep(0.1)
    assert server.most_in_flight <= 16


# --- verdicts ---------------------------------------------------------------------


async def test_a_ceiling_appears_once_quorum_polls_succeed(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    server = await reporter(reporting(servable=4))
    w = await watch()
    added = w.observer.set_home("a", server.base, a_policy(samples=3, quorum=3))
    assert added == Verdict(None, NO_REPORT_YET)
    seen = await w.until("a", Verdict(4, None))
    assert seen == [
        Verdict(None, awaiting_quorum_reason(1, 3)),
        Verdict(None, awaiting_quorum_reason(2, 3)),
        Verdict(4, None),
    ]
    assert w.observer.verdict("a") == Verdict(4, None)


async def test_a_failed_poll_takes_the_ceiling_away(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    status = 200

    async def flaky(request: web.Request) -> web.StreamResponse:
        return web.Response(text=json.dumps(a_report(3)), status=status)

    server = await reporter(flaky)
    w = await watch()
    w.observer.set_home("a", server.base, a_policy(quorum=2))
    await w.until("a", Verdict(3, None))
    status = 404
    await w.until("a", Verdict(None, "capacity endpoint returned HTTP 404"))
    status = 200
    seen = await w.until("a", Verdict(3, None))
    assert seen == [Verdict(None, awaiting_quorum_reason(1, 2)), Verdict(3, None)]


@pytest.mark.parametrize(
    ("observed_at", "reason", "outcome"),
    [
        (NOW - timedelta(seconds=40), stale_reason(seconds("30s")), Outcome.STALE),
        (NOW + timedelta(seconds=5), FUTURE, Outcome.FUTURE),
    ],
    ids=["stale", "future"],
)
async def test_a_reading_out_of_date_gives_no_ceiling(
    watch: WatchFactory,
    reporter: StartReporter,
    observed_at: datetime,
    reason: str,
    outcome: Outcome,
) -> None:
    server = await reporter(reporting(observed_at=observed_at))
    w = await watch()
    w.observer.set_home("a", server.base, a_policy(max_age="30s"))
    assert await w.next_change() == ("a", Verdict(None, reason))
    assert set(w.stats.by_outcome) == {outcome}


async def test_readings_that_age_out_between_polls_take_the_ceiling_away(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    """The verdict changes when a reading reaches maxAge, without waiting for the next poll."""

    async def fresh_now(request: web.Request) -> web.StreamResponse:
        return web.Response(text=json.dumps(a_report(5, datetime.now(UTC))))

    server = await reporter(fresh_now)
    w = await watch(clock=lambda: datetime.now(UTC))
    key = next(k for k in (f"home-{i}" for i in range(100)) if first_offset(k, 2.0) < 0.2)
    w.observer.set_home(
        key, server.base, a_policy(period="2s", samples=1, quorum=1, max_age="300ms")
    )
    await w.until(key, Verdict(5, None))
    await w.until(key, Verdict(None, stale_reason(Duration.parse("300ms"))))
    assert len(server.requests) == 1


# --- changes while running -------------------------------------------------------


async def test_a_new_endpoint_starts_the_home_over(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    old = await reporter(reporting(servable=4))
    new = await reporter(reporting(servable=2))
    w = await watch()
    policy = a_policy(samples=2, quorum=2)
    w.observer.set_home("a", old.base, policy)
    await w.until("a", Verdict(4, None))
    assert w.observer.set_home("a", new.base, policy) == Verdict(None, NO_REPORT_YET)
    seen = await w.until("a", Verdict(2, None))
    assert seen == [
        Verdict(None, NO_REPORT_YET),
        Verdict(None, awaiting_quorum_reason(1, 2)),
        Verdict(2, None),
    ]
    polled_before = len(old.requests)
    await asyncio.sleep(0.2)
    assert len(old.requests) == polled_before


@pytest.mark.parametrize(
    "changed",
    [
        a_policy(samples=4, quorum=2),
        a_policy(samples=3, quorum=1),
        a_policy(samples=3, quorum=2, max_age="40s"),
        a_policy(samples=3, quorum=2, period="60ms"),
        a_policy(samples=3, quorum=2, timeout="2s"),
        a_policy(samples=3, quorum=2, method="POST"),
    ],
    ids=["samples", "quorum", "maxAge", "period", "timeout", "method"],
)
async def test_a_changed_setting_starts_the_home_over(
    watch: WatchFactory, reporter: StartReporter, changed: CapacityPolicy
) -> None:
    server = await reporter(reporting(servable=4))
    w = await watch()
    w.observer.set_home("a", server.base, a_policy(samples=3, quorum=2))
    await w.until("a", Verdict(4, None))
    assert w.observer.set_home("a", server.base, changed) == Verdict(None, NO_REPORT_YET)
    assert await w.next_change() == ("a", Verdict(None, NO_REPORT_YET))


async def test_the_same_settings_keep_the_window(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    server = await reporter(reporting(servable=4))
    w = await watch()
    w.observer.set_home("a", server.base, a_policy(quorum=2))
    await w.until("a", Verdict(4, None))
    assert w.observer.set_home("a", server.base, a_policy(quorum=2)) == Verdict(4, None)
    await asyncio.sleep(0.15)
    assert w.changes.empty()


async def test_a_removed_home_is_polled_no_more(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    server = await reporter(reporting())
    w = await watch()
    w.observer.set_home("a", server.base, a_policy())
    await w.until("a", Verdict(4, None))
    w.observer.remove_home("a")
    await asyncio.sleep(0.02)
    polled = len(server.requests)
    await asyncio.sleep(0.25)
    assert len(server.requests) == polled
    assert w.observer.verdict("a") is None
    assert len(w.observer) == 0


async def test_a_home_removed_mid_poll_gives_its_slot_to_the_next(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    stalled = await reporter(reporting(delay=20))
    server = await reporter(reporting())
    w = await watch(budget=1)
    w.observer.set_home("a", stalled.base, a_policy(timeout="15s"))
    while stalled.in_flight < 1:
        await asyncio.sleep(0.01)
    w.observer.remove_home("a")
    # the one slot is free at once: the poll of "a" is cancelled, not waited for
    w.observer.set_home("b", server.base, a_policy())
    await w.until("b", Verdict(4, None), timeout=3)
    assert w.observer.keys() == ["b"]


async def test_a_failing_on_change_costs_one_poll_and_not_the_polling(
    reporter: StartReporter,
) -> None:
    server = await reporter(reporting())
    changes: list[Verdict] = []

    def on_change(key: object, verdict: Verdict) -> None:
        changes.append(verdict)
        if len(changes) == 1:
            raise RuntimeError("a fault in the caller")

    async with PollClient(RequestBudget(1), 65536) as client:
        observer = Observer(client, on_change, clock=lambda: NOW)
        await observer.start()
        observer.set_home("a", server.base, a_policy(period="20ms"))
        while observer.verdict("a") != Verdict(4, None):
            await asyncio.sleep(0.01)
        polled = len(server.requests)
        await asyncio.sleep(0.2)
        assert len(server.requests) > polled  # the only worker still polls
        observer.set_home("a", server.base, a_policy(period="20ms", quorum=2))
        while observer.verdict("a") != Verdict(4, None):
            await asyncio.sleep(0.01)
        await observer.stop()
    assert changes[0] == Verdict(4, None)
    # the changes after the fault are reported as ever
    assert changes[1] == Verdict(None, NO_REPORT_YET)
    assert changes[-1] == Verdict(4, None)


async def test_an_endpoint_that_cannot_be_polled_shows_why_at_once(watch: WatchFactory) -> None:
    w = await watch()
    verdict = w.observer.set_home("a", "ftp://reporter.example", a_policy())
    assert verdict == Verdict(
        None,
        'capacity target is invalid: endpoint URL "ftp://reporter.example" must use HTTP or HTTPS',
    )
    relative = w.observer.set_home("b", "reporter.example/capacity", a_policy())
    assert relative.fallback_reason == (
        'capacity target is invalid: endpoint URL "reporter.example/capacity" must be absolute'
    )


# --- start and stop ----------------------------------------------------------------


async def test_homes_wait_for_the_observer_to_start_and_start_over_when_it_does(
    reporter: StartReporter,
) -> None:
    server = await reporter(reporting())
    changes: list[tuple[object, Verdict]] = []
    async with PollClient(RequestBudget(4), 65536) as client:
        observer = Observer(client, lambda k, v: changes.append((k, v)), clock=lambda: NOW)
        starting = observer.set_home("a", server.base, a_policy())
        assert starting == Verdict(
            None, "capacity observation could not be submitted: observer is starting"
        )
        await asyncio.sleep(0.15)
        assert server.requests == []
        await observer.start()
        assert changes == [("a", Verdict(None, NO_REPORT_YET))]
        while observer.verdict("a") != Verdict(4, None):
            await asyncio.sleep(0.02)
        await observer.stop()
        assert observer.verdict("a") == Verdict(
            None, "capacity observation could not be submitted: observer is stopping"
        )
        polled = len(server.requests)
        await asyncio.sleep(0.15)
        assert len(server.requests) == polled


def established_to(port: int) -> int:
    """Client sockets connected to a loopback port, from the kernel's TCP table."""
    count = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port == port and fields[3] == "01":  # 01: ESTABLISHED
                count += 1
    return count


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs /proc/net/tcp")
async def test_stopping_mid_poll_leaves_no_task_or_connection(reporter: StartReporter) -> None:
    server = await reporter(reporting(delay=5))
    port = int(server.base.rsplit(":", 1)[1])
    client = PollClient(RequestBudget(4), 65536)
    observer = Observer(client, lambda k, v: None, clock=lambda: NOW)
    await observer.start()
    for key in range(8):
        observer.set_home(key, server.base, a_policy(period="50ms", timeout="9s"))
    while server.in_flight < 4:
        await asyncio.sleep(0.01)
    assert established_to(port) == 4
    await observer.stop()
    await client.close()
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith(WORKER_NAME)] == []
    assert established_to(port) == 0


async def test_a_home_waiting_in_line_when_the_observer_stops_is_not_sent(
    watch: WatchFactory, reporter: StartReporter
) -> None:
    """The slot that the stop frees is not handed to a home in line: it is retired too."""
    server = await reporter(reporting(2, delay=5))
    w = await watch(budget=1)
    for key in ("a", "b"):
        w.observer.set_home(key, server.base, a_policy(period="1s", timeout="9s"))
    while not (server.requests and w.budget.waiting == 1):
        await asyncio.sleep(0.01)
    await w.observer.stop()
    await asyncio.sleep(0.1)
    assert len(server.requests) == 1
    assert w.budget.granted == 1  # a's slot only: none went to b as a's was cancelled
    assert w.budget.in_use == 0 and w.budget.waiting == 0
