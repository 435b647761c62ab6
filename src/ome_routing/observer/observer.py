"""The capacity observer: one schedule per home, each home's window, verdict changes.

Each home gets a task that polls it every `period` (the first poll placed within the
first period by a stable hash of its key), never two polls of one home at once, all
within the shared `RequestBudget` of its `PollClient`. Between polls the task wakes
when the window says the verdict can change (a reading reaching `maxAge`) and judges
again. Readings and failures go to the core's window functions, with the wall clock
from the one injected `clock`; the observer never computes weights.

`on_change(key, verdict)` is called, from the event loop, whenever an existing home's
verdict changes (a ceiling appears, changes or goes, or its fallback reason changes,
including when a change of the home's settings or endpoint starts it over). A home that
is added starts with the empty window's verdict and is not reported; read it with
`verdict(key)`. `stop()` reports nothing.

Homes set before `start()`, or while the observer stops, show the reason
`capacity observation could not be submitted: observer is starting` (or `... stopping`);
`start()` starts every home over with an empty window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Protocol

from ome_routing.core.capacity import (
    Verdict,
    Window,
    WindowSettings,
    empty_window,
    judge,
    next_change,
    record_failure,
    record_reading,
)
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.observer import failures
from ome_routing.observer.failures import Outcome, PollFailure
from ome_routing.observer.polling import PollClient, PollRequest, build_request
from ome_routing.observer.scheduling import first_offset, next_due

HomeKey = Hashable
Clock = Callable[[], datetime]
OnChange = Callable[[HomeKey, Verdict], None]


def wall_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class PollEvent:
    """One finished poll, for metrics: times are event-loop seconds."""

    key: HomeKey
    outcome: Outcome
    #: when the poll was due and started waiting for a request slot
    started: float
    #: seconds spent waiting for the slot (the request went out at started + waited)
    waited: float
    #: seconds from sending the request to the end of the answer
    latency: float


class PollStats(Protocol):
    """What the observer reports about its polls; the metrics layer implements it."""

    def poll_finished(self, event: PollEvent) -> None: ...


class NoStats:
    def poll_finished(self, event: PollEvent) -> None:
        return None


@dataclass(slots=True)
class PollCounts:
    """A plain `PollStats`: polls by outcome, and total latency and wait."""

    by_outcome: dict[Outcome, int] = field(default_factory=dict)
    latency_seconds: float = 0.0
    waited_seconds: float = 0.0
    longest_wait: float = 0.0

    def poll_finished(self, event: PollEvent) -> None:
        self.by_outcome[event.outcome] = self.by_outcome.get(event.outcome, 0) + 1
        self.latency_seconds += event.latency
        self.waited_seconds += event.waited
        self.longest_wait = max(self.longest_wait, event.waited)

    @property
    def total(self) -> int:
        return sum(self.by_outcome.values())


class _Phase(Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"


@dataclass(eq=False, slots=True)
class _Home:
    key: HomeKey
    endpoint: str
    policy: CapacityPolicy
    #: the request to send, or why none can be built
    request: PollRequest | PollFailure
    window: Window
    verdict: Verdict
    #: the window's `next_change` as judged at `judged_at` (it holds until that moment)
    change: datetime | None
    judged_at: datetime
    task: asyncio.Task[None] | None = None


def _settings(policy: CapacityPolicy) -> WindowSettings:
    return WindowSettings(samples=policy.samples, quorum=policy.quorum, max_age=policy.max_age)


def _request(endpoint: str, policy: CapacityPolicy) -> PollRequest | PollFailure:
    try:
        return build_request(endpoint, policy.path, policy.method)
    except PollFailure as failure:
        return failure


class Observer:
    """Polls every home it holds and keeps each home's window. Use from one event loop."""

    def __init__(
        self,
        client: PollClient,
        on_change: OnChange,
        *,
        clock: Clock = wall_clock,
        stats: PollStats | None = None,
    ) -> None:
        self._client = client
        self._on_change = on_change
        self._clock = clock
        self._stats: PollStats = stats if stats is not None else NoStats()
        self._homes: dict[HomeKey, _Home] = {}
        self._phase = _Phase.STARTING
        self._retiring: set[asyncio.Task[None]] = set()

    # --- the homes --------------------------------------------------------------

    def set_home(self, key: HomeKey, endpoint: str, policy: CapacityPolicy) -> Verdict:
        """Add a home, or change one; returns its verdict.

        The same endpoint and policy leave the home as it is. A different endpoint or any
        change of the policy starts it over with an empty window.
        """
        home = self._homes.get(key)
        if home is not None and home.endpoint == endpoint and home.policy == policy:
            return home.verdict
        if home is not None:
            self._retire(home)
        fresh = self._new_home(key, endpoint, policy)
        self._homes[key] = fresh
        if self._phase is _Phase.RUNNING:
            self._launch(fresh)
        if home is not None and fresh.verdict != home.verdict:
            self._on_change(key, fresh.verdict)
        return fresh.verdict

    def remove_home(self, key: HomeKey) -> None:
        """Stop polling a home and forget its window; unknown keys are ignored."""
        home = self._homes.pop(key, None)
        if home is not None:
            self._retire(home)

    def verdict(self, key: HomeKey) -> Verdict | None:
        """The home's verdict as last judged, or None for a home the observer does not hold."""
        home = self._homes.get(key)
        return home.verdict if home is not None else None

    def keys(self) -> list[HomeKey]:
        return list(self._homes)

    def __len__(self) -> int:
        return len(self._homes)

    # --- start and stop -----------------------------------------------------------

    async def start(self) -> None:
        """Start every home over with an empty window, and start polling."""
        if self._phase is _Phase.RUNNING:
            return
        self._phase = _Phase.RUNNING
        for key, old in list(self._homes.items()):
            home = self._new_home(key, old.endpoint, old.policy)
            self._homes[key] = home
            self._launch(home)
            if home.verdict != old.verdict:
                self._on_change(key, home.verdict)

    async def stop(self) -> None:
        """Stop every poll and wait until no task of the observer is left."""
        if self._phase is not _Phase.RUNNING:
            self._phase = _Phase.STOPPING
            await self._drain()
            return
        self._phase = _Phase.STOPPING
        reason = failures.not_submitted("observer is stopping").reason
        for home in self._homes.values():
            self._retire(home)
            home.window = record_failure(home.window, reason)
            home.verdict = Verdict(None, reason)
            home.change = None
        await self._drain()

    async def _drain(self) -> None:
        while self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    # --- one home -------------------------------------------------------------------

    def _new_home(self, key: HomeKey, endpoint: str, policy: CapacityPolicy) -> _Home:
        window = empty_window(_settings(policy))
        request = _request(endpoint, policy)
        if self._phase is not _Phase.RUNNING:
            reason = failures.not_submitted(f"observer is {self._phase.value}").reason
            window = record_failure(window, reason)
        elif isinstance(request, PollFailure):
            window = record_failure(window, request.reason)
        now = self._clock()
        judged, change = judge(window, now)
        return _Home(key, endpoint, policy, request, window, judged, change, now)

    def _launch(self, home: _Home) -> None:
        if isinstance(home.request, PollFailure):
            return  # nothing to send: the verdict shows why, until the home changes
        home.task = asyncio.create_task(self._run(home, home.request), name=f"poll {home.key!r}")

    def _retire(self, home: _Home) -> None:
        task = home.task
        home.task = None
        if task is not None and not task.done():
            task.cancel()
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    def _judge(self, home: _Home, now: datetime) -> None:
        judged, home.change = judge(home.window, now)
        home.judged_at = now
        if judged != home.verdict:
            home.verdict = judged
            if self._homes.get(home.key) is home:
                self._on_change(home.key, judged)

    async def _run(self, home: _Home, request: PollRequest) -> None:
        loop = asyncio.get_running_loop()
        policy = home.policy
        period = policy.period.seconds
        due = loop.time() + first_offset(home.key, period)
        while True:
            if loop.time() < due:
                await self._wait_until(home, due, loop)
            started = loop.time()
            result = await self._client.poll(request, policy.timeout)
            now = self._clock()
            if result.reading is not None:
                home.window = record_reading(home.window, result.reading, now)
                outcome = result.outcome
                if home.window.failure is not None:
                    outcome = Outcome.STALE if home.window.stale else Outcome.FUTURE
            else:
                assert result.reason is not None
                home.window = record_failure(home.window, result.reason)
                outcome = result.outcome
            self._judge(home, now)
            self._stats.poll_finished(
                PollEvent(home.key, outcome, started, result.waited, result.latency)
            )
            due = next_due(due, period, loop.time())

    async def _wait_until(self, home: _Home, due: float, loop: asyncio.AbstractEventLoop) -> None:
        """Sleep until `due`, waking to judge again whenever a reading ages out."""
        while True:
            at = loop.time()
            if at >= due:
                return
            wake = due
            now = self._clock()
            # judged after the last poll or wake-up; it holds until its moment, unless
            # the clock has gone back since
            change = home.change if now >= home.judged_at else next_change(home.window, now)
            if change is not None:
                # never spin: a moment already past is judged after a millisecond
                wake = min(due, at + max((change - now).total_seconds(), 0.001))
            await asyncio.sleep(wake - at)
            if wake < due:
                self._judge(home, self._clock())
