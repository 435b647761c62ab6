"""The shared request budget: `routing.observer.maxConcurrentRequests` slots.

Capacity polls and health probes both take a slot before their request is sent, and
give it back when the answer has been read. Waiting for a slot never fails a request:
its `timeout` starts only once it holds one. The budget records how long requests waited.

Slots go to waiting requests first come, first served: a slot given back passes
straight to the oldest waiter, so a request that arrives later cannot take it first.
It runs once per request, so it is kept lean: no lock object, and no await at all
while a slot is free.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from types import TracebackType


@dataclass(slots=True)
class Slot:
    """A held slot; `waited` is how many seconds it took to get it."""

    waited: float


class RequestBudget:
    """At most `limit` requests underway at once, across every kind that shares it."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"maxConcurrentRequests must be positive, got {limit}")
        self._limit = limit
        #: waiters, oldest first; a cancelled one leaves the queue at once
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._waited_total = 0.0
        self._granted = 0
        self._held = 0

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_use(self) -> int:
        """How many slots are held now."""
        return self._held

    @property
    def waiting(self) -> int:
        """How many requests wait for a slot now."""
        return len(self._waiters)

    @property
    def granted(self) -> int:
        """How many slots have been handed out since the budget was made."""
        return self._granted

    @property
    def waited_seconds(self) -> float:
        """The total time that requests have spent waiting for slots."""
        return self._waited_total

    def slot(self) -> _Holding:
        """Hold one slot for the body of an `async with`; it yields a `Slot`."""
        return _Holding(self)

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody waits for it; give it back with `release`."""
        if self._held < self._limit and not self._waiters:
            self._held += 1
            self._granted += 1
            return True
        return False

    async def acquire(self) -> float:
        """Take a slot, waiting for one if need be; returns the seconds waited.

        Give it back with `release`, also when the request fails.
        """
        if self.try_acquire():
            return 0.0
        loop = asyncio.get_running_loop()
        start = loop.time()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                if waiter in self._waiters:  # `release` may have dropped it already
                    self._waiters.remove(waiter)
            else:  # the slot was passed on as the wait was cancelled: pass it on again
                self.release()
            raise
        # `release` counted the slot as held when it passed it on
        waited = loop.time() - start
        self._granted += 1
        self._waited_total += waited
        return waited

    def wait_for_slot(self) -> asyncio.Future[None]:
        """A future that is done when a slot passes to it, in turn with every waiter.

        For a caller that waits by callback rather than in a coroutine; once the
        future is done the slot is held: count it with `passed`, give it back with
        `release`. Cancel the future to stop waiting.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter

    def stop_waiting(self, waiter: asyncio.Future[None]) -> None:
        """Take a future of `wait_for_slot` out of the line; a slot it got goes back."""
        if waiter.done():
            if not waiter.cancelled():
                self.release()
            return
        waiter.cancel()
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    def passed(self, waited: float) -> None:
        """Count a slot that `wait_for_slot`'s future got after `waited` seconds."""
        self._granted += 1
        self._waited_total += waited

    def release(self) -> None:
        """Give a slot back: to the oldest waiter, or to the free ones."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._held -= 1


class _Holding:
    """The `async with` of one slot (a class, not a generator: it runs for every request)."""

    __slots__ = ("_budget",)

    def __init__(self, budget: RequestBudget) -> None:
        self._budget = budget

    async def __aenter__(self) -> Slot:
        return Slot(await self._budget.acquire())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._budget.release()
