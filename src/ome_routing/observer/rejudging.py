"""When the observer judges a home again between its polls: one timer for every home.

Only age changes a window between polls (`capacity.next_change`: the moment a reading
reaching `maxAge` changes the verdict), so after a poll the observer judges the home
again at that moment if it comes before the next poll. An event-loop timer per home
would cost a timer handle on nearly every poll, armed as the poll lands and called off
as the next goes out. Here
the moments wait in one `DueQueue`, where they mostly arrive in order (each is a
reading's stamp plus `maxAge`), and one timer rings for the first of them. A moment
stands for the poll that set it (the home's `picked`): a home polled again since, or
one with a poll underway, or retired, is passed over when its moment comes, so nothing
is ever called off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ome_routing.observer.homes import Home
from ome_routing.observer.scheduling import DueQueue

#: The queue's one lane: moments that come in order queue there, the rest in its heap.
_LANE = "rejudge"
#: Homes judged in one turn of the event loop at most. Moments come in bunches (readings
#: stamped to the second age out together: thousands of homes at 100,000), and judging a
#: bunch in one turn would hold up every poll due meanwhile; the rest wait a turn.
RING_BATCH = 256


class Rejudging:
    """The moments to judge homes again at, and the one timer for the first of them."""

    def __init__(self, on_due: Callable[[Home], None]) -> None:
        self._on_due = on_due
        self._queue: DueQueue[tuple[Home, float]] = DueQueue(max_lanes=1)
        self._timer: asyncio.TimerHandle | None = None
        #: when `_timer` rings (uvloop's timers do not say)
        self._timer_when = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, loop: asyncio.AbstractEventLoop, home: Home, when: float) -> None:
        """Call `on_due(home)` at `when` (loop seconds), unless the home is polled first."""
        self._queue.push((home, home.picked), when, _LANE)
        self._loop = loop
        self._arm(loop, when)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        """Ring at `when` unless the timer already rings before it."""
        timer = self._timer
        if timer is None or when < self._timer_when:
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(when, self._ring)
            self._timer_when = when

    def clear(self) -> None:
        """Forget every moment, and call off the timer."""
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ring(self) -> None:
        loop = self._loop
        assert loop is not None
        self._timer = None
        # the timer may ring a hair before its moment: what it was set for has passed
        now = max(loop.time(), self._timer_when)
        queue = self._queue
        due: list[Home] = []
        while len(due) < RING_BATCH and (entry := queue.pop_due(now)) is not None:
            home, picked = entry
            if home.picked == picked and home.flight is None and not home.retired:
                due.append(home)
        # judged after the queue is looked at: a home judged may set its next moment
        for home in due:
            self._on_due(home)
        # the first moment left: a home judged may have set the timer for a later one,
        # and those of a bunch past `RING_BATCH` are due already (they ring next turn)
        first = queue.first_due()
        if first is not None:
            self._arm(loop, first)
