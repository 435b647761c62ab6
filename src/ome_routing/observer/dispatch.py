"""The observer's schedule and its place in the shared request budget.

Homes wait on one `DueQueue` by due time. `_pump` sends every due home's poll that a
free budget slot allows, earliest first; a due home that finds every slot held waits in
the budget's line of its flow (the InferenceService's namespace), beside the probes of
that flow, and its poll goes out when the budget passes it a slot in its flow's turn
(`budget`: the waiting flow that holds the fewest slots first). So one tenant's due
homes never stand in front of another tenant's. Then the schedule waits: a poll of its
own that ends pumps again, and one timer (for the first home due) rings when nothing is
due yet. The wait in line counts as the polls' wait for a slot.

`Dispatcher` is the base of `observer.Observer`, which supplies `_fly` (send one due
home's poll, a slot being held for it) and its phase.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from ome_routing.observer.homes import Home, Phase
from ome_routing.observer.polling import PollClient
from ome_routing.observer.scheduling import DueQueue

#: How late the schedule may ring for the first home due, so that the homes due within
#: it go out together, in one turn of the event loop: one timer and one wake-up for
#: several polls rather than one each. A wake-up costs about the same whatever it
#: carries, so where polls are sparse the wake-ups weigh: a replica of a sharded
#: controller polls a third of the homes but, with 2 ms here, woke almost as often as the
#: single leader (643-664 against 804 times a second at 10,000 services) and spent
#: 1.55-1.59 times a third of the leader's CPU; with 10 ms, 182-189 against 275, and
#: 1.46-1.51 times (`bench/sharding`, 6 Dec 2026). A poll goes out at most this late,
#: small against any period (`minPeriod` is at least 1 s by default) and against the
#: interval lag the benchmarks hold the observer to (100 ms); the home's next one is still
#: due a period after this one was due, not after it went out.
RING_SLACK = 0.01


class Dispatcher:
    """The schedule of the homes due, sent within the budget. Use from one event loop."""

    def __init__(self, client: PollClient) -> None:
        self._poller = client
        self._budget = client.budget
        self._limit = client.budget.limit
        self._phase = Phase.STARTING
        #: scheduled homes by due time; retired ones stay until they reach the front
        self._queue: DueQueue[Home] = DueQueue()
        #: polls the first scheduled home when it is due
        self._timer: asyncio.TimerHandle | None = None
        #: when `_timer` rings (uvloop's timers do not say)
        self._timer_when = 0.0
        #: a `_pump` is on its way (`_kick`), or running
        self._kicked = False
        self._pumping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def _fly(self, home: Home, now: float) -> None:
        """Send a due home's poll (a slot is held for it)."""
        raise NotImplementedError

    def _schedule(self, home: Home, due: float, lane: Hashable | None = None) -> None:
        """Put the home on the schedule; `lane` as `DueQueue.push` takes it."""
        home.due = due
        self._queue.push(home, due, lane)

    def _take(self, now: float) -> Home | None:
        """The first scheduled home that is due at `now` and not retired, off the schedule."""
        queue = self._queue
        while True:
            home = queue.pop_due(now)
            if home is None or not home.retired:
                return home

    def _kick(self) -> None:
        """Poll the due homes on the next turn of the event loop (once for many calls)."""
        if not self._kicked and self._phase is Phase.RUNNING:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        """Poll every due home that a free slot allows; the others wait in the budget's line.

        A home waits in its flow's line of the budget (not on a task): when a slot
        passes to it, in its flow's turn, `_slot_passed` sends its poll. Then it waits
        for the first home due.
        """
        self._kicked = False
        if self._pumping or self._phase is not Phase.RUNNING:
            return
        loop = self._loop
        assert loop is not None
        budget = self._budget
        self._pumping = True
        # one moment for the turn: the polls it sends go out together at its end
        now = loop.time()
        try:
            while True:
                home = self._take(now)
                if home is None:
                    self._set_timer(loop)
                    return
                if budget.try_acquire(home.flow):
                    self._fly(home, now)
                    continue
                # no slot is free, and none will be in this turn that the line does not
                # take: the due homes join it
                while home is not None:
                    budget.enqueue(home, home.flow)
                    home = self._take(now)
                self._set_timer(loop)
                return
        finally:
            self._pumping = False

    def _slot_passed(self, home: Home) -> None:
        """The budget passed a slot to a home in its line (`Home.set_result`).

        The wait is the poll's (`PollEvent.waited`, from when it was due), not counted
        in the budget's `waited_seconds` as well: one call less a poll.
        """
        if self._phase is not Phase.RUNNING:  # stopping: the homes are being retired
            self._budget.release(home.flow)
            return
        loop = self._loop
        assert loop is not None
        self._fly(home, loop.time())

    def _next_after(self, home: Home) -> None:
        """A poll of `home` ended and gave its slot back: send the next due poll.

        When the budget handed the slot on to a request in line (it had one waiting),
        no slot is free and the schedule has nothing to send: the homes falling due
        join the line when the timer rings for them, so only the timer is checked
        (the home's next poll may come before it rings).
        """
        if self._budget.in_use < self._limit:
            self._pump()
            return
        if home.retired:
            return
        timer = self._timer
        if timer is None or home.due + RING_SLACK < self._timer_when:
            loop = self._loop
            assert loop is not None
            self._set_timer(loop)

    def _set_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pump when the first scheduled home is due."""
        first = self._queue.first_due()
        if first is None:
            return
        ring = first + RING_SLACK
        timer = self._timer
        if timer is not None:
            if self._timer_when <= ring:
                return
            timer.cancel()
        self._timer = loop.call_at(ring, self._ring)
        self._timer_when = ring

    def _ring(self) -> None:
        self._timer = None
        self._pump()

    def _stop_dispatching(self) -> None:
        """Empty the schedule and call off the timer (homes in line are retired: passed over)."""
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
