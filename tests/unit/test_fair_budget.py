"""The request budget's fair shares: which waiting flow a slot given back goes to.

Pure asyncio, no network: the waiters are futures and plain objects that answer as one.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from ome_routing.observer.budget import FlowUse, RequestBudget


class Waiting:
    """A waiter by callback, as the observer's homes wait: it records when it got a slot."""

    def __init__(self, name: str, log: list[str], *, gone: bool = False) -> None:
        self.name = name
        self.log = log
        self.gone = gone

    def done(self) -> bool:
        return self.gone

    def set_result(self, result: Any, /) -> None:
        self.log.append(self.name)


def holding(budget: RequestBudget, **held: int) -> None:
    """Take free slots for each flow, as many as given."""
    for flow, count in held.items():
        for _ in range(count):
            assert budget.try_acquire(flow)


def test_a_free_slot_goes_to_any_flow_and_one_busy_flow_may_hold_them_all() -> None:
    """An idle share is lent: with nobody waiting, a flow takes every free slot."""
    budget = RequestBudget(4)
    holding(budget, a=4)
    assert budget.held_by("a") == 4 and budget.in_use == 4
    assert not budget.try_acquire("b")  # none left: b waits for one to come back


def test_a_slot_given_back_goes_to_the_waiting_flow_that_holds_the_fewest() -> None:
    """Not to the oldest waiter overall: a's waiters came first, b holds fewer."""
    budget = RequestBudget(4)
    holding(budget, a=3, b=1)
    log: list[str] = []
    for i in range(3):
        budget.enqueue(Waiting(f"a{i}", log), "a")
    budget.enqueue(Waiting("b0", log), "b")
    budget.release("a")  # a holds 2, b 1: b's turn
    assert log == ["b0"]
    assert budget.held_by("a") == 2 and budget.held_by("b") == 2
    budget.release("b")  # b waits no more: a's oldest
    assert log == ["b0", "a0"]


def test_a_flow_over_its_share_waits_for_its_own_slots_to_come_back() -> None:
    """a holds 3 of 4 and asks for more; b's waiters take every slot until b holds as many."""
    budget = RequestBudget(4)
    holding(budget, a=3, b=1)
    log: list[str] = []
    budget.enqueue(Waiting("a0", log), "a")
    for i in range(3):
        budget.enqueue(Waiting(f"b{i}", log), "b")
    budget.release("a")  # a 2, b 1 -> b
    budget.release("a")  # a 1, b 2 -> a (fewest now)
    budget.release("b")  # a 2, b 1 -> b
    assert log == ["b0", "a0", "b1"]
    assert budget.held_by("a") == 2 and budget.held_by("b") == 2


def test_flows_that_hold_as_many_take_turns() -> None:
    """With one slot, every waiting flow holds none: they are served round after round."""
    budget = RequestBudget(1)
    holding(budget, a=1)
    log: list[str] = []
    for name in ("a0", "a1", "b0", "b1", "c0"):
        budget.enqueue(Waiting(name, log), name[0])
    budget.release("a")  # a holds none now, and goes after b and c, which held none before
    for _ in range(4):
        budget.release(log[-1][0])
    assert log == ["b0", "c0", "a0", "b1", "a1"]


def test_within_a_flow_the_oldest_waiter_is_first() -> None:
    budget = RequestBudget(1)
    holding(budget, a=1)
    log: list[str] = []
    for i in range(3):
        budget.enqueue(Waiting(f"a{i}", log), "a")
    for _ in range(3):
        budget.release("a")
    assert log == ["a0", "a1", "a2"]
    budget.release("a")
    assert budget.in_use == 0 and budget.waiting == 0


def test_a_waiter_that_is_gone_is_passed_over_and_its_flow_keeps_its_turn() -> None:
    budget = RequestBudget(2)
    holding(budget, a=1, b=1)
    log: list[str] = []
    budget.enqueue(Waiting("a-gone", log, gone=True), "a")
    budget.enqueue(Waiting("a1", log), "a")
    budget.enqueue(Waiting("b0", log), "b")
    budget.release("b")  # a and b hold 1 and 0: b
    budget.release("a")  # a holds 0: its first live waiter
    assert log == ["b0", "a1"]
    assert budget.waiting == 0


def test_a_slot_given_back_with_only_gone_waiters_in_line_is_free() -> None:
    budget = RequestBudget(1)
    holding(budget, a=1)
    budget.enqueue(Waiting("gone", [], gone=True), "b")
    assert budget.waiting == 1
    budget.release("a")
    assert budget.waiting == 0 and budget.in_use == 0
    assert budget.try_acquire("c")


def test_a_waiter_that_gives_its_slot_back_at_once_hands_it_on_without_nesting() -> None:
    """A request that fails as it is sent gives its slot back inside the hand-over."""
    budget = RequestBudget(1)
    holding(budget, a=1)
    log: list[str] = []

    class FailsAtOnce(Waiting):
        def set_result(self, result: Any, /) -> None:
            super().set_result(result)
            budget.release("a")
            log.append(f"{self.name} gave back")

    for i in range(3):
        budget.enqueue(FailsAtOnce(f"a{i}", log), "a")
    budget.release("a")
    # each gave its slot back before the next got it, and each hand-over had returned
    assert log == ["a0", "a0 gave back", "a1", "a1 gave back", "a2", "a2 gave back"]
    assert budget.in_use == 0 and budget.waiting == 0 and budget.granted == 4


def test_flows_reports_what_each_flow_holds_and_how_many_wait() -> None:
    budget = RequestBudget(3)
    holding(budget, a=2, b=1)
    budget.enqueue(Waiting("a", []), "a")
    budget.enqueue(Waiting("c", []), "c")
    budget.enqueue(Waiting("c", []), "c")
    assert budget.flows() == {
        "a": FlowUse(held=2, waiting=1),
        "b": FlowUse(held=1, waiting=0),
        "c": FlowUse(held=0, waiting=2),
    }


async def test_a_coroutine_waits_in_its_flows_turn() -> None:
    budget = RequestBudget(2)
    holding(budget, a=2)
    order: list[str] = []

    async def wait(flow: str, name: str) -> None:
        await budget.acquire(flow)
        order.append(name)

    tasks = [asyncio.create_task(wait("a", "a0")), asyncio.create_task(wait("b", "b0"))]
    await asyncio.sleep(0)
    assert budget.waiting == 2
    budget.release("a")  # a holds 1, b none: b first although a came first
    await asyncio.sleep(0)
    assert order == ["b0"]
    budget.release("a")
    await asyncio.gather(*tasks)
    assert order == ["b0", "a0"]
    assert budget.held_by("a") == 1 and budget.held_by("b") == 1


async def test_a_coroutine_cancelled_while_waiting_leaves_its_flows_line() -> None:
    budget = RequestBudget(1)
    holding(budget, a=1)
    waiter = asyncio.create_task(budget.acquire("b"))
    await asyncio.sleep(0)
    assert budget.flows()["b"] == FlowUse(held=0, waiting=1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert budget.waiting == 0 and "b" not in budget.flows()
    budget.release("a")
    assert budget.in_use == 0 and budget.try_acquire("c")


async def test_a_coroutine_cancelled_as_its_slot_arrives_passes_it_to_the_next_flow() -> None:
    budget = RequestBudget(1)
    holding(budget, a=1)
    cancelled = asyncio.create_task(budget.acquire("b"))
    following = asyncio.create_task(budget.acquire("c"))
    await asyncio.sleep(0)
    budget.release("a")  # to b (the first flow of those that hold none), not run yet
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await following
    assert budget.flows() == {"c": FlowUse(held=1, waiting=0)}


async def test_a_place_by_callback_given_up_leaves_its_line() -> None:
    budget = RequestBudget(1)
    holding(budget, a=1)
    place = budget.wait_for_slot("b")
    budget.stop_waiting(place, "b")
    assert budget.waiting == 0 and place.cancelled()
    budget.release("a")
    assert budget.in_use == 0


@pytest.mark.parametrize("seed", range(20))
def test_every_slot_goes_to_a_waiting_flow_that_holds_the_fewest(seed: int) -> None:
    """Random takes and give-backs: the budget's counts hold, and the shares are max-min fair."""
    rng = random.Random(seed)
    limit = rng.randint(1, 6)
    budget = RequestBudget(limit)
    flows = [f"ns-{i}" for i in range(rng.randint(1, 5))]
    held = dict.fromkeys(flows, 0)
    waiting = dict.fromkeys(flows, 0)
    got: list[str] = []

    class Recorded(Waiting):
        def set_result(self, result: Any, /) -> None:
            fewest = min(held[f] for f in flows if waiting[f])
            flow = self.name
            assert held[flow] == fewest, (flow, held, waiting)
            held[flow] += 1
            waiting[flow] -= 1
            got.append(flow)

    for _ in range(300):
        flow = rng.choice(flows)
        if rng.random() < 0.5 and held[flow]:
            held[flow] -= 1
            budget.release(flow)
        elif budget.try_acquire(flow):
            held[flow] += 1
        else:
            waiting[flow] += 1
            budget.enqueue(Recorded(flow, []), flow)
        assert budget.in_use == sum(held.values()) <= limit
        assert budget.waiting == sum(waiting.values())
        assert all(budget.held_by(f) == held[f] for f in flows)
        # nobody waits while a slot is free
        assert budget.waiting == 0 or budget.in_use == limit
