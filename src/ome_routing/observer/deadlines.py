"""Time limits for the requests underway, kept on one timer for all of them.

`asyncio.timeout` arms a timer of its own for every request and disarms it when the
answer is in, so each poll would push a timer onto the event loop's heap and leave a
cancelled one there. Here, a limit only joins a set; one timer is armed for the nearest
limit and, when it fires, cancels the requests whose limit has passed and re-arms
itself for the next. Polls that share a `timeout` start in order, so a new limit is
almost never the nearest and the timer fires about once per `timeout`, whatever the
poll rate.

A limit behaves as `asyncio.timeout` does: its task is cancelled at the limit, and the
`async with` turns that cancellation into `TimeoutError`; a cancellation from elsewhere
stays one. It must be used inside a task.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any


class Deadlines:
    """The limits of the requests underway on one event loop, and the one timer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._underway: set[Limit] = set()
        self._timer: asyncio.TimerHandle | None = None

    def limit(self, when: float) -> Limit:
        """Bound the body of an `async with` to end by `when`, in event-loop seconds."""
        return Limit(self, when)

    def __len__(self) -> int:
        return len(self._underway)

    def close(self) -> None:
        """Disarm the timer once no limit is underway (it is not re-armed while idle)."""
        if not self._underway and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _add(self, limit: Limit) -> None:
        self._underway.add(limit)
        timer = self._timer
        if timer is None or limit.when < timer.when():
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(limit.when, self._expire)

    def _expire(self) -> None:
        timer = self._timer
        # the timer may run a hair before its moment: what it was armed for has passed
        passed = self._loop.time() if timer is None else max(timer.when(), self._loop.time())
        self._timer = None
        nearest: float | None = None
        for limit in list(self._underway):
            if limit.when <= passed:
                self._underway.discard(limit)
                limit.expire()
            elif nearest is None or limit.when < nearest:
                nearest = limit.when
        if nearest is not None:
            self._timer = self._loop.call_at(nearest, self._expire)


class Limit:
    """One request's time limit: the `async with` that `Deadlines.limit` gives."""

    __slots__ = ("_cancelling", "_deadlines", "_expired", "_task", "when")

    def __init__(self, deadlines: Deadlines, when: float) -> None:
        self._deadlines = deadlines
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._expired = False
        self.when = when

    @property
    def expired(self) -> bool:
        return self._expired

    def expire(self) -> None:
        """Cancel the task now; its `async with` raises `TimeoutError`."""
        if self._task is not None and not self._expired:
            self._expired = True
            self._task.cancel()

    async def __aenter__(self) -> Limit:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a time limit must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._deadlines._add(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._deadlines._underway.discard(self)
        if (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError from exc
