"""When a home is polled: at once or at a stable offset, then every `period`.

A home that appears while the controller runs is polled at once, as OME does. After a
restart every home would be due at once too, so the homes held at start are placed
within their first period by a hash of their key that does not change between
processes (Python's `hash` does): the load spreads evenly and stays where it was.
Later deadlines advance by whole periods (`advance`, OME's arithmetic). Pure
arithmetic on loop-clock seconds, and the queue of homes by due time (`DueQueue`); the
observer does the waiting.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import math
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

_SPAN = float(1 << 64)
#: How far from the end of its lane an item that comes a little out of order is placed
#: in it (`DueQueue.push`) rather than in the heap.
_NEAR = 64


def stable_fraction(key: Hashable) -> float:
    """A number in [0, 1) that depends only on `repr(key)`, the same in every process."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SPAN


def first_offset(key: Hashable, period: float) -> float:
    """Seconds from a home's start to its first poll: within [0, period)."""
    return stable_fraction(key) * period


def advance(deadline: float | None, now: float, period: float) -> float:
    """The deadline after a poll that goes out at `now`: OME's deadline advance.

    A deadline still ahead stays. One that has passed moves on by whole periods to the
    first boundary after `now`, so a poll that ran late keeps its cadence: it neither
    drifts by its lateness nor is followed by a burst of the polls it missed. With no
    deadline yet, the next is one period from now.
    """
    if deadline is None:
        return now + period
    if deadline > now:
        return deadline
    following = deadline + (math.floor((now - deadline) / period) + 1) * period
    # the float division may land a hair short of the boundary after `now`
    return following if following > now else following + period


class DueQueue(Generic[T]):
    """Items by due time, earliest first, cheap for items that come back every period.

    A heap would do, but taking from a heap of thousands of entries costs a dozen
    comparisons on memory that is cold by then. Items that are pushed with a `lane` (the
    observer's: a period, or "late") mostly arrive in due order within it, since each
    comes back one period after it was due: those go to the end of the lane's queue,
    those a little out of order (polls underway at once end out of the order they went
    out in) into their place near its end, and only the few that would break its order
    further go to the heap. Taking looks at the front of every lane and of the heap. At
    most `max_lanes` lanes are kept; items of other lanes go to the heap too.
    """

    def __init__(self, max_lanes: int = 16) -> None:
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()
        self._lanes: dict[Hashable, deque[tuple[float, T]]] = {}
        #: the lanes' queues, to look at their fronts without a view of the dict
        self._queues: list[deque[tuple[float, T]]] = []
        self._max_lanes = max_lanes

    def __len__(self) -> int:
        return len(self._heap) + sum(map(len, self._queues))

    def push(self, item: T, due: float, lane: Hashable | None = None) -> None:
        if lane is not None:
            queue = self._lanes.get(lane)
            if queue is None and len(self._lanes) < self._max_lanes:
                queue = self._lanes[lane] = deque()
                self._queues.append(queue)
            if queue is not None:
                if not queue or queue[-1][0] <= due:
                    queue.append((due, item))
                    return
                if self._insert(queue, due, item):
                    return
        heapq.heappush(self._heap, (due, next(self._order), item))

    @staticmethod
    def _insert(queue: deque[tuple[float, T]], due: float, item: T) -> bool:
        """Put an item a little out of order in its place near the end of its lane.

        Polls that go out in due order end a little out of it (many are underway at
        once), so a home often comes back due just before the last few of its lane.
        Placed after those due no later than it, within `_NEAR` of the end; False when
        its place is further in (it goes to the heap).
        """
        size = len(queue)
        index = size - 1  # queue[index] is due after `due`
        stop = max(size - _NEAR, 0)
        while index > stop and queue[index - 1][0] > due:
            index -= 1
        if index == stop and stop > 0 and queue[stop - 1][0] > due:
            return False
        queue.insert(index, (due, item))
        return True

    def first_due(self) -> float | None:
        """When the first item is due, or None when there is none."""
        first = self._heap[0][0] if self._heap else None
        for queue in self._queues:
            if queue and (first is None or queue[0][0] < first):
                first = queue[0][0]
        return first

    def pop_due(self, now: float) -> T | None:
        """Take the first item if it is due at `now`."""
        heap = self._heap
        first = heap[0][0] if heap else None
        source: deque[tuple[float, T]] | None = None
        for queue in self._queues:
            if queue and (first is None or queue[0][0] < first):
                first, source = queue[0][0], queue
        if first is None or first > now:
            return None
        if source is not None:
            return source.popleft()[1]
        return heapq.heappop(heap)[2]

    def clear(self) -> None:
        self._heap.clear()
        self._lanes.clear()
        self._queues.clear()
