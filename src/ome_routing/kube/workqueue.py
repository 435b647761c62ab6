"""A keyed work queue, as controllers use: deduplicated, never one key twice at once.

A key added while it waits is queued once; a key added while a worker holds it is queued
again when the worker calls `done`, so the latest change is always seen. `add_after`
schedules a key for later (a requeue), keeping the earliest time asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._deadlines: dict[K, float] = {}

    def add(self, key: K) -> None:
        self._cancel_timer(key)
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        if key in self._queued or self._deadlines.get(key, float("inf")) <= when:
            return
        self._cancel_timer(key)
        self._deadlines[key] = when
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self._deadlines.pop(key, None)
        self.add(key)

    def _cancel_timer(self, key: K) -> None:
        timer = self._timers.pop(key, None)
        self._deadlines.pop(key, None)
        if timer is not None:
            timer.cancel()

    async def get(self) -> K:
        key = await self._ready.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def __len__(self) -> int:
        return len(self._queued)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._deadlines.clear()
