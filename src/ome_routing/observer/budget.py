"""The shared request budget: `routing.observer.maxConcurrentRequests` slots, shared fairly.

Capacity polls and health probes both take a slot before their request is sent, and
give it back when the answer has been read. Waiting for a slot never fails a request:
its `timeout` starts only once it holds one. The budget records how long requests waited.

Every request names its flow: the InferenceService's namespace (the tenant), as
Kubernetes' API Priority and Fairness queues requests by flow. While a slot is free
nobody waits, and any flow takes it, as many as it asks for: the share of a flow that
asks for none is lent to the others (with one busy flow it may hold every slot). When
every slot is held, requests wait in their flow's line, oldest first, and a slot given
back goes to the waiting flow that holds the fewest slots (max-min fairness; flows that
hold as many take turns), never to the oldest waiter overall. So a flow that asks for
more than its share waits for its own slots to come back, and a flow under its share
gets the next slot that any flow gives back: a tenant whose requests stall for their
whole `timeout` holds at most the slots nobody else asked for, and never the next one.
A held slot is never taken back (a wait never fails a request).

It runs once per request, so it is kept lean: no lock object, no await at all while a
slot is free, and the waiting flows kept by how many slots they hold, so that choosing
the next one does not look at every flow.

A waiter is a future (`acquire`, `wait_for_slot`) or any object that answers `done()`
and `set_result(None)` as a future does (`enqueue`: the observer's homes, which wait in
line without a task of their own). A waiter whose `done()` is true when its turn comes
(a cancelled future, a home the observer dropped) is passed over.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

#: The flow of a request that names none (`check-reporter`, the tests): namespaces are
#: never empty, so it is nobody's namespace.
DEFAULT_FLOW = ""


class Waiter(Protocol):
    """What waits for a slot: a future, or an object that answers as one."""

    def done(self) -> bool: ...

    def set_result(self, result: Any, /) -> None: ...


@dataclass(slots=True)
class Slot:
    """A held slot; `waited` is how many seconds it took to get it."""

    waited: float


@dataclass(frozen=True, slots=True)
class FlowUse:
    """One flow's part of the budget now: slots held and requests waiting."""

    held: int
    waiting: int


class RequestBudget:
    """At most `limit` requests underway at once, across every kind and flow that share it."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"maxConcurrentRequests must be positive, got {limit}")
        self._limit = limit
        self._held = 0
        #: slots held by flow (flows holding none are left out)
        self._held_by: dict[str, int] = {}
        #: the flows with waiters, and their waiters oldest first
        self._lines: dict[str, deque[Waiter]] = {}
        #: the flows with waiters by how many slots each holds (`_by_held[n]`, in the
        #: order they take turns); no list below `_lowest` has a flow
        self._by_held: list[dict[str, None]] = [{} for _ in range(limit + 1)]
        self._lowest = 0
        #: waiters in every line (a waiter passed over still counts until its turn)
        self._waiting = 0
        #: slots given back while a slot was being handed on (handed on in turn, not nested)
        self._handing = False
        self._to_hand = 0
        self._waited_total = 0.0
        self._granted = 0

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

    def held_by(self, flow: str) -> int:
        """How many slots the flow holds now."""
        return self._held_by.get(flow, 0)

    def flows(self) -> dict[str, FlowUse]:
        """Every flow that holds a slot or waits for one, with how many of each.

        Safe to call from another thread (the metrics scrape's): it copies each dict in
        one call before reading it.
        """
        waiting = {flow: len(line) for flow, line in list(self._lines.items())}
        uses = {
            flow: FlowUse(held, waiting.pop(flow, 0)) for flow, held in self._held_by.copy().items()
        }
        for flow, count in waiting.items():
            uses[flow] = FlowUse(0, count)
        return uses

    def slot(self, flow: str = DEFAULT_FLOW) -> _Holding:
        """Hold one slot for the body of an `async with`; it yields a `Slot`."""
        return _Holding(self, flow)

    def try_acquire(self, flow: str = DEFAULT_FLOW) -> bool:
        """Take a slot if one is free and nobody waits for it; give it back with `release`."""
        if self._held < self._limit and not self._waiting:
            self._held += 1
            held_by = self._held_by
            held_by[flow] = held_by.get(flow, 0) + 1
            self._granted += 1
            return True
        return False

    async def acquire(self, flow: str = DEFAULT_FLOW) -> float:
        """Take a slot, waiting for one if need be; returns the seconds waited.

        Give it back with `release(flow)`, also when the request fails.
        """
        if self.try_acquire(flow):
            return 0.0
        loop = asyncio.get_running_loop()
        start = loop.time()
        waiter: asyncio.Future[None] = loop.create_future()
        self.enqueue(waiter, flow)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                self._leave(waiter, flow)
            else:  # the slot was passed on as the wait was cancelled: pass it on again
                self.release(flow)
            raise
        # `_hand_on` counted the slot as held when it passed it on
        waited = loop.time() - start
        self._waited_total += waited
        return waited

    def wait_for_slot(self, flow: str = DEFAULT_FLOW) -> asyncio.Future[None]:
        """A future that is done when a slot passes to it, in its flow's turn.

        For a caller that waits by callback rather than in a coroutine; once the
        future is done the slot is held: count the wait with `passed`, give the slot
        back with `release(flow)`. Give up waiting with `stop_waiting`.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.enqueue(waiter, flow)
        return waiter

    def enqueue(self, waiter: Waiter, flow: str = DEFAULT_FLOW) -> None:
        """Put a waiter at the end of its flow's line (only while every slot is held).

        Its `set_result(None)` is called when a slot passes to it: from then it holds
        the slot (count the wait with `passed`, give it back with `release(flow)`).
        """
        line = self._lines.get(flow)
        if line is None:
            line = self._lines[flow] = deque()
            held = self._held_by.get(flow, 0)
            self._by_held[held][flow] = None
            if held < self._lowest:
                self._lowest = held
        line.append(waiter)
        self._waiting += 1

    def stop_waiting(self, waiter: asyncio.Future[None], flow: str = DEFAULT_FLOW) -> None:
        """Take a future of `wait_for_slot` out of the line; a slot it got goes back."""
        if waiter.done():
            if not waiter.cancelled():
                self.release(flow)
            return
        waiter.cancel()
        self._leave(waiter, flow)

    def passed(self, waited: float) -> None:
        """Count the wait of a slot that passed to a waiter of `wait_for_slot` or `enqueue`."""
        self._waited_total += waited

    def release(self, flow: str = DEFAULT_FLOW) -> None:
        """Give a flow's slot back: to the next flow in line, or to the free ones."""
        if self._waiting and not self._handing and len(self._lines) == 1:
            line = self._lines.get(flow)
            if line is not None and len(line) > 1 and not line[0].done():
                # the one flow in line gives a slot back: it passes to that flow's next
                # waiter, and what each flow holds stays as it is (a saturated budget's
                # usual case, kept short)
                waiter = line.popleft()
                self._waiting -= 1
                self._granted += 1
                self._handing = True
                try:
                    waiter.set_result(None)
                    if self._to_hand:  # it gave the slot back at once
                        self._hand_given_back()
                finally:
                    self._handing = False
                    self._to_hand = 0
                return
        held_by = self._held_by
        held = held_by[flow] - 1
        if held:
            held_by[flow] = held
        else:
            del held_by[flow]
        self._held -= 1
        if not self._waiting:
            return
        if flow in self._lines:  # it waits too: one slot fewer moves it up the line
            by_held = self._by_held
            del by_held[held + 1][flow]
            by_held[held][flow] = None
            if held < self._lowest:
                self._lowest = held
        self._to_hand += 1
        if self._handing:
            return
        self._handing = True
        try:
            self._hand_given_back()
        finally:
            self._handing = False
            self._to_hand = 0

    # --- inside -------------------------------------------------------------------

    def _hand_given_back(self) -> None:
        """Hand on the slots given back (also inside a waiter's `set_result`), in turn.

        A request that fails as it is sent gives its slot back while it is being handed
        one: that slot is counted in `_to_hand` and handed on here, not by a nested call.
        """
        while self._to_hand and self._waiting:
            self._to_hand -= 1
            self._hand_on()

    def _hand_on(self) -> None:
        """Pass a free slot to the first live waiter of the flow that holds the fewest."""
        by_held = self._by_held
        lines = self._lines
        while self._waiting:
            held = self._lowest
            turn = by_held[held]
            while not turn:
                held += 1
                turn = by_held[held]
            self._lowest = held
            flow = next(iter(turn))
            line = lines[flow]
            waiter = line.popleft()
            self._waiting -= 1
            if waiter.done():  # cancelled, or gone: its place is passed over
                if not line:
                    del turn[flow]
                    del lines[flow]
                continue
            del turn[flow]
            if line:  # after the flows that hold as many: they take turns
                by_held[held + 1][flow] = None
            else:
                del lines[flow]
            self._held_by[flow] = held + 1
            self._held += 1
            self._granted += 1
            waiter.set_result(None)
            return

    def _leave(self, waiter: Waiter, flow: str) -> None:
        """Take a waiter that gave up out of its flow's line, if it is still there."""
        line = self._lines.get(flow)
        if line is None or waiter not in line:
            return  # `_hand_on` passed over it already
        line.remove(waiter)
        self._waiting -= 1
        if not line:
            del self._lines[flow]
            del self._by_held[self._held_by.get(flow, 0)][flow]


class _Holding:
    """The `async with` of one slot (a class, not a generator: it runs for every request)."""

    __slots__ = ("_budget", "_flow")

    def __init__(self, budget: RequestBudget, flow: str) -> None:
        self._budget = budget
        self._flow = flow

    async def __aenter__(self) -> Slot:
        return Slot(await self._budget.acquire(self._flow))

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._budget.release(self._flow)
