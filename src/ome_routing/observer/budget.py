"""The shared request budget: `routing.observer.maxConcurrentRequests` slots.

Capacity polls and health probes both take a slot before their request is sent, and
give it back when the answer has been read. Waiting for a slot never fails a request:
its `timeout` starts only once it holds one. The budget records how long requests waited.
"""

from __future__ import annotations

import asyncio
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
        self._free = asyncio.Semaphore(limit)
        self._waiting = 0
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
        return self._waiting

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

    async def _acquire(self) -> Slot:
        loop = asyncio.get_running_loop()
        start = loop.time()
        if self._free.locked():
            self._waiting += 1
            try:
                await self._free.acquire()
            finally:
                self._waiting -= 1
        else:
            await self._free.acquire()
        waited = loop.time() - start
        self._granted += 1
        self._waited_total += waited
        self._held += 1
        return Slot(waited)

    def _release(self) -> None:
        self._held -= 1
        self._free.release()


class _Holding:
    """The `async with` of one slot (a class, not a generator: it runs for every request)."""

    __slots__ = ("_budget",)

    def __init__(self, budget: RequestBudget) -> None:
        self._budget = budget

    async def __aenter__(self) -> Slot:
        return await self._budget._acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._budget._release()
