"""Time limits for the requests underway, kept on one timer for all of them.

`asyncio.timeout` arms a timer of its own for every request and disarms it when the
answer is in, so each poll would push a timer onto the event loop's heap and leave a
cancelled one there. Here, a limit only joins a set; one timer is armed for the nearest
limit and, when it fires, cancels the requests whose limit has passed and re-arms
itself for the next. Polls that share a `timeout` start in order, so a new limit is
almost never the nearest and the timer fires about once per `timeout`, whatever the
poll rate.

A limit behaves as `asyncio.timeout` does: its task is cancelled at the limit, and the
caller turns that cancellation into a timeout, while a cancellation from elsewhere stays
one. It is armed with `arm` and taken off with `disarm`, which says whether the limit
was the cause; no context manager, since it runs for every request and the coroutines
of one would cost on each. A request that runs as callbacks rather than in a task
(`flight`) is its own limit (`Expiring`: a moment and what to do then): `add` arms it
and `drop` takes it off.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Expiring(Protocol):
    """What a limit is to the timer: when it passes, and what to do then."""

    @property
    def when(self) -> float: ...

    def expire(self) -> None: ...


class Deadlines:
    """The limits of the requests underway on one event loop, and the one timer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._underway: set[Expiring] = set()
        self._timer: asyncio.TimerHandle | None = None
        #: when the timer fires (uvloop's timers do not say)
        self._timer_when = 0.0

    def arm(self, when: float, task: asyncio.Task[Any] | None = None) -> Limit:
        """Cancel `task` (the current one by default) at `when` unless `disarm` comes first.

        Call `disarm` when the work is over, whatever its outcome; if it returns True, a
        `CancelledError` that the task is seeing is the limit's: raise `TimeoutError`.
        A caller that runs many limits in one task can pass it, to save looking it up.
        """
        if task is None:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("a time limit must be used inside a task")
        limit = Limit(task, when)
        self.add(limit)
        return limit

    def drop(self, limit: Expiring) -> None:
        """Take a limit of `add` off (it may have expired already)."""
        self._underway.discard(limit)

    def disarm(self, limit: Limit) -> bool:
        """Take a limit off; True when it expired and cancelled the task."""
        self._underway.discard(limit)
        # as `asyncio.timeout`: the limit's cancellation is taken back (`uncancel`), and
        # it is the limit's only if no other cancellation was requested meanwhile
        return limit.expired and limit.task.uncancel() <= limit.cancelling

    def __len__(self) -> int:
        return len(self._underway)

    def close(self) -> None:
        """Disarm the timer once no limit is underway (it is not re-armed while idle)."""
        if not self._underway and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def add(self, limit: Expiring) -> None:
        """Call `limit.expire()` at `limit.when` unless `drop` comes first."""
        self._underway.add(limit)
        timer = self._timer
        if timer is None or limit.when < self._timer_when:
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(limit.when, self._expire)
            self._timer_when = limit.when

    def _expire(self) -> None:
        timer = self._timer
        # the timer may run a hair before its moment: what it was armed for has passed
        passed = self._loop.time() if timer is None else max(self._timer_when, self._loop.time())
        self._timer = None
        nearest: float | None = None
        expired: list[Expiring] = []
        for limit in self._underway:
            if limit.when <= passed:
                expired.append(limit)
            elif nearest is None or limit.when < nearest:
                nearest = limit.when
        self._underway.difference_update(expired)
        if nearest is not None:
            self._timer = self._loop.call_at(nearest, self._expire)
            self._timer_when = nearest
        # last: an expiry that calls back may arm new limits, against the timer set above
        for limit in expired:
            limit.expire()


class Limit:
    """One request's time limit, armed by `Deadlines.arm`."""

    __slots__ = ("cancelling", "expired", "task", "when")

    def __init__(self, task: asyncio.Task[Any], when: float) -> None:
        self.task = task
        #: the task's pending cancellations when the limit was armed
        self.cancelling = task.cancelling()
        self.expired = False
        self.when = when

    def expire(self) -> None:
        """Cancel the task now; `disarm` then reports the limit as the cause."""
        if not self.expired:
            self.expired = True
            self.task.cancel()
