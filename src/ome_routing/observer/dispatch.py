"""The observer's schedule and its place in the shared request budget.

Homes wait on one `DueQueue` by due time. `_pump` sends every due home's poll that a
free budget slot allows, earliest first; a due home that finds every slot held waits in
the budget's line of its flow (the InferenceService's namespace), beside the probes of
that flow, and its poll goes out when the budget passes it a slot in its flow's turn
(`budget`: the waiting flow that holds the fewest slots first). So one tenant's due
homes never stand in front of another tenant's. Then the schedule waits for one timer,
which rings a little after the first home due (the slack: `ring_slack`) and sends every
home due by then; a poll that ends hands its slot to the line, or back to the budget,
and sends nothing itself, so that polls go out in rings rather than one answer at a
time. The wait in line counts as the polls' wait for a slot.

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
#: carries, so the sparser the polls, the more of them a ring must wait for: the slack
#: follows the rate of polls, to carry about `RING_POLLS` a ring, within these bounds.
#: With 10 ms at every rate the observer spent about 1.5 times more CPU a poll at 1,300
#: polls a second (a sharded replica's share) than at 4,000, and with this 1.3 times
#: (`bench/poll_throughput`, 6 Dec 2026). A poll goes out at most `MAX_RING_SLACK` late,
#: small against any period (`minPeriod` is at least 1 s by default) and against the
#: interval lag the benchmarks hold the observer to (100 ms); the home's next one is
#: still due a period after this one was due, not after it went out.
MIN_RING_SLACK = 0.01
MAX_RING_SLACK = 0.05
#: the polls a ring is to carry: the slack is this many polls' worth at the rate of
#: the last `RATE_WINDOW`, within the bounds (30 ms at 4,000 polls a second, the most
#: from 2,400 down)
RING_POLLS = 120
#: how often (seconds, at least) the slack follows the rate of polls
RATE_WINDOW = 1.0


def ring_slack(rate: float) -> float:
    """How late a ring may come at `rate` polls a second: `RING_POLLS` of them, within
    `MIN_RING_SLACK` and `MAX_RING_SLACK`."""
    if rate <= RING_POLLS / MAX_RING_SLACK:
        return MAX_RING_SLACK
    return max(RING_POLLS / rate, MIN_RING_SLACK)


class Dispatcher:
    """The schedule of the homes due, sent within the budget. Use from one event loop."""

    def __init__(self, client: PollClient) -> None:
        self._poller = client
        self._budget = client.budget
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
        #: how late a ring may come after the first home due (`RING_POLLS`)
        self._slack = MAX_RING_SLACK
        #: homes taken off the schedule since `_counted_since` (loop time)
        self._taken = 0
        self._counted_since = 0.0

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
            if home is None:
                return None
            if not home.retired:
                self._taken += 1
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
        """A poll of `home` ended and gave its slot back (the budget handed it on to a
        request in line, if one waited): the homes falling due since the last ring wait
        for the next, so only the timer is checked (the home's next poll may come before
        it rings). Sending them now, an answer at a time, cost a wake-up for a poll or
        two where the ring sends many.
        """
        if home.retired:
            return
        timer = self._timer
        if timer is None or home.due + self._slack < self._timer_when:
            loop = self._loop
            assert loop is not None
            self._set_timer(loop)

    def _set_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pump when the first scheduled home is due."""
        first = self._queue.first_due()
        if first is None:
            return
        ring = first + self._slack
        timer = self._timer
        if timer is not None:
            if self._timer_when <= ring:
                return
            timer.cancel()
        self._timer = loop.call_at(ring, self._ring)
        self._timer_when = ring

    def _ring(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        elapsed = now - self._counted_since
        if elapsed >= RATE_WINDOW:
            self._slack = ring_slack(self._taken / elapsed)
            self._taken = 0
            self._counted_since = now
        self._pump()

    def _stop_dispatching(self) -> None:
        """Empty the schedule and call off the timer (homes in line are retired: passed over)."""
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
