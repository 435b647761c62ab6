"""The capacity observer: one schedule per home, each home's window, verdict changes.

Each home is polled every `period`, never two polls of one home at once, all within
the shared `RequestBudget` of its `PollClient`. When the first poll goes out:

- A home added (or started over by a new endpoint or policy) while the observer runs
  is polled at once, as OME polls a new home: with the guide's `quorum: 3` and
  `period: 10s`, a ceiling about 20 seconds later.
- The homes the observer holds when it starts (those of a controller that starts or
  gains leadership) are spread over their first period by a stable hash of their key
  (`scheduling.first_offset`), so that a restart does not send every poll at once.

After that, each poll's next deadline advances from the one it was due at, by whole
periods, to the first boundary after the poll went out (`scheduling.advance`, OME's
deadline advance): a poll that fell behind lands on the next period boundary instead
of drifting, and is never followed by a burst of the polls it missed.

The homes wait on one schedule (`DueQueue`), and the due ones are polled, earliest
first, as long as the budget has a free slot: a home that is due while every slot is
held waits in the budget's line of its flow (its InferenceService's namespace), and
that wait counts as its wait for a slot. A poll runs as callbacks
(`flight`), not as a task: when one ends, the next due home takes its slot in the same
turn of the event loop; one timer, for the first home due, wakes the schedule when
nothing is. Between polls, one timer for every home (`rejudging`) judges a home again
when its window says the verdict can change (a reading reaching `maxAge`). Readings and
failures go to the core's window functions (the usual reading recorded and judged in
one step), with the wall clock from the one injected `clock`; the observer never
computes weights. A home that changes or goes while its poll is underway has that poll
cancelled, and its slot goes to the next due home.

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
import logging
from collections.abc import Callable
from datetime import datetime

from ome_routing.core.capacity import (
    Verdict,
    Window,
    empty_window,
    judge,
    record_and_judge,
    record_failure,
)
from ome_routing.core.capacity import verdict as verdict_at
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.report import Reading
from ome_routing.observer import failures
from ome_routing.observer.budget import DEFAULT_FLOW
from ome_routing.observer.dispatch import Dispatcher
from ome_routing.observer.failures import Outcome, PollFailure
from ome_routing.observer.flight import TaggedFlight
from ome_routing.observer.homes import (
    NOT_SUBMITTED,
    Clock,
    Home,
    HomeKey,
    Phase,
    due_of,
    home_request,
    shared_policy,
    wall_clock,
    window_settings,
)
from ome_routing.observer.polling import PollClient
from ome_routing.observer.rejudging import Rejudging
from ome_routing.observer.request import PollRequest
from ome_routing.observer.scheduling import advance, first_offset
from ome_routing.observer.stats import NoStats as NoStats
from ome_routing.observer.stats import PollCounts as PollCounts
from ome_routing.observer.stats import PollEvent as PollEvent
from ome_routing.observer.stats import PollStats as PollStats

log = logging.getLogger("ome_routing.observer")

#: The schedule's lane of homes that were due again as soon as their poll ended.
_LATE = "late"
#: The lanes of first polls: homes added while the observer runs (due at once, in the
#: order they came), and the homes held at start (in the order of their offsets).
_AT_ONCE = "at once"
_SPREAD = "spread"
#: The names of the observer's tasks (those that open a poll's connection) start with this.
WORKER_NAME = "capacity poller"

OnChange = Callable[[HomeKey, Verdict], None]

_new_event = tuple.__new__


class Observer(Dispatcher):
    """Polls every home it holds and keeps each home's window. Use from one event loop."""

    def __init__(
        self,
        client: PollClient,
        on_change: OnChange,
        *,
        clock: Clock = wall_clock,
        stats: PollStats | None = None,
    ) -> None:
        super().__init__(client)
        self._on_change = on_change
        self._clock = clock
        self._stats: PollStats = stats if stats is not None else NoStats()
        self._homes: dict[HomeKey, Home] = {}
        self._sender = client.sender
        self._rejudging = Rejudging(self._woken)

    # --- the homes --------------------------------------------------------------

    def set_home(
        self, key: HomeKey, endpoint: str, policy: CapacityPolicy, flow: str = DEFAULT_FLOW
    ) -> Verdict:
        """Add a home, or change one; returns its verdict.

        `flow` is the budget's flow its polls wait in (the InferenceService's namespace),
        part of the home's identity as its key is. The same endpoint and policy leave the
        home as it is. A different endpoint or any change of the policy starts it over
        with an empty window.
        """
        home = self._homes.get(key)
        if home is not None and home.endpoint == endpoint and home.policy == policy:
            return home.verdict
        if home is not None:
            self._retire(home)
        fresh = self._new_home(key, endpoint, shared_policy(policy), flow)
        self._homes[key] = fresh
        if self._phase is Phase.RUNNING:
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

    def window(self, key: HomeKey) -> Window | None:
        """The home's window as last recorded (its readings: for the journal's words and a
        shadow policy to read), or None."""
        home = self._homes.get(key)
        return home.window if home is not None else None

    def keys(self) -> list[HomeKey]:
        return list(self._homes)

    def __len__(self) -> int:
        return len(self._homes)

    # --- start and stop -----------------------------------------------------------

    async def start(self) -> None:
        """Start every home over with an empty window, and start polling.

        The first polls of the homes held now are spread over their first period.
        """
        if self._phase is Phase.RUNNING:
            return
        await self._drain()  # a stop that did not wait for its tasks
        self._phase = Phase.RUNNING
        self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        first: list[tuple[float, Home]] = []
        for key, old in list(self._homes.items()):
            home = self._new_home(key, old.endpoint, old.policy, old.flow, old.request)
            self._homes[key] = home
            if not isinstance(home.request, PollFailure):
                offset = first_offset(home.key, home.policy.period.seconds)
                first.append((now + offset, home))
            if home.verdict != old.verdict:
                self._on_change(key, home.verdict)
        # in due order, so that they queue in one lane rather than in the heap
        first.sort(key=due_of)
        for due, home in first:
            self._schedule(home, due, _SPREAD)
        self._kick()

    async def stop(self) -> None:
        """Stop every poll and wait until no task of the observer is left."""
        if self._phase is not Phase.RUNNING:
            self._phase = Phase.STOPPING
            await self._drain()
            return
        self._phase = Phase.STOPPING
        reason = failures.not_submitted("observer is stopping").reason
        # every home retired before any poll is cancelled: a slot that a cancelled poll
        # gives back passes over the homes waiting in the budget's line
        for home in self._homes.values():
            home.retired = True
        for home in self._homes.values():
            self._retire(home)
            home.window = record_failure(home.window, reason)
            home.verdict = Verdict(None, reason)
            home.change = None
        self._stop_dispatching()
        self._rejudging.clear()
        await self._drain()

    async def _drain(self) -> None:
        """Wait for the cancelled tasks that were opening connections to end.

        One turn of the event loop first: the connections of the polls dropped close
        on it.
        """
        await asyncio.sleep(0)
        tasks = list(self._poller.connecting())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- one home -------------------------------------------------------------------

    def _new_home(
        self,
        key: HomeKey,
        endpoint: str,
        policy: CapacityPolicy,
        flow: str,
        request: PollRequest | PollFailure | None = None,
    ) -> Home:
        """A home with an empty window; `request` is the home's as built before, if it was."""
        window = empty_window(window_settings(policy))
        if request is None:
            request = home_request(endpoint, policy)
        if self._phase is not Phase.RUNNING:
            window = record_failure(window, NOT_SUBMITTED[self._phase])
        elif isinstance(request, PollFailure):
            window = record_failure(window, request.reason)
        verdict = verdict_at(window, self._clock())
        return Home(key, endpoint, policy, request, window, verdict, flow=flow, line=self)

    def _launch(self, home: Home) -> None:
        """Schedule the first poll of a home added while the observer runs: at once."""
        if isinstance(home.request, PollFailure):
            return  # nothing to send: the verdict shows why, until the home changes
        self._schedule(home, asyncio.get_running_loop().time(), _AT_ONCE)
        self._kick()

    def _retire(self, home: Home) -> None:
        home.retired = True
        flight = home.flight
        if flight is not None:
            home.flight = None
            flight.cancel()  # its slot is free again: the next due home takes it
            self._kick()

    def _judge(self, home: Home, now: datetime) -> None:
        judged, home.change = judge(home.window, now)
        self._held(home, judged)

    def _held(self, home: Home, judged: Verdict) -> None:
        """The home's verdict is `judged` now: report a change."""
        held = home.verdict
        # field by field: the dataclass's `!=` costs more, once per poll
        if judged.ceiling != held.ceiling or judged.fallback_reason != held.fallback_reason:
            home.verdict = judged
            if self._homes.get(home.key) is home:
                self._on_change(home.key, judged)

    def _fly(self, home: Home, now: float) -> None:
        """Send a due home's poll (a slot is held for it)."""
        policy = home.policy
        request = home.request
        assert not isinstance(request, PollFailure)
        home.picked = now
        # the next deadline advances as the poll goes out: the first period boundary
        # after now, counted from the deadline this poll was due at
        due = home.due
        home.following = due if due > now else advance(due, now, policy.period.seconds)
        flight = TaggedFlight(self._sender, request, policy.timeout, self, home, home.flow)
        home.flight = flight
        flight.launch()

    def _landed(
        self,
        home: Home,
        outcome: Outcome,
        reading: Reading | None,
        reason: str | None,
        latency: float,
    ) -> None:
        """A poll ended (its slot given back): record it, and poll the next due home."""
        home.flight = None
        if not home.retired:
            try:
                self._record(home, outcome, reading, reason, latency)
            except Exception:
                # a fault of the observer's own (or of `on_change`) costs one poll: the
                # home keeps its schedule
                log.exception("capacity poll of %r failed", home.key)
                if not home.retired:
                    loop = self._loop
                    assert loop is not None
                    self._schedule(home, loop.time() + home.policy.period.seconds)
        try:
            self._next_after(home)
        except Exception:
            # called from a connection's answer: a fault here must not close it
            log.exception("capacity polls: the schedule failed to send the next due poll")

    def _record(
        self,
        home: Home,
        outcome: Outcome,
        reading: Reading | None,
        reason: str | None,
        latency: float,
    ) -> None:
        """Record a poll's outcome, judge the home and schedule its next poll."""
        due = home.due  # the deadline this poll was due at, until `_schedule` below
        now = self._clock()
        if reading is not None:
            window, judged, change = record_and_judge(home.window, reading, now)
            if window.failure is not None:
                outcome = Outcome.STALE if window.stale else Outcome.FUTURE
        else:
            assert reason is not None
            window = record_failure(home.window, reason)
            judged, change = judge(window, now)
        home.window = window
        loop = self._loop
        assert loop is not None
        at = loop.time()
        following = home.following
        # when a reading will age out matters only to a home that waits for its next
        # poll; one that is due again at once (the budget is saturated) is judged then
        waits = at < following
        home.change = change if waits else None
        self._held(home, judged)
        # `_set_wake`'s test, first without its call: most changes come after the next poll
        if waits and change is not None and at + (change - now).total_seconds() < following:
            self._set_wake(home, now, at, following)
        # the homes of one period come back in the order they were due; late ones
        # (due again at once) in the order they finished
        self._schedule(home, following, home.policy.period.seconds if waits else _LATE)
        # waited: from when the poll was due until its request went out
        # made as a tuple: a named tuple's own `__new__` is one more Python call a poll
        event = _new_event(PollEvent, (home.key, outcome, due, home.picked - due, latency))
        self._stats.poll_finished(event)

    def _set_wake(self, home: Home, now: datetime, at: float, due: float) -> None:
        """Judge the home again when a reading ages out, if that comes before `due`."""
        assert home.change is not None
        # never spin: a moment already past is judged after a millisecond
        wake = at + max((home.change - now).total_seconds(), 0.001)
        if wake < due:
            loop = self._loop
            assert loop is not None
            self._rejudging.add(loop, home, wake)

    def _woken(self, home: Home) -> None:
        """A moment of `_set_wake` came, with no poll of the home since (`Rejudging`)."""
        now = self._clock()
        self._judge(home, now)
        if home.change is not None:
            self._set_wake(home, now, asyncio.get_running_loop().time(), home.due)
