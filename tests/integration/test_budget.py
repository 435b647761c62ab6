"""The shared request budget: never more than `maxConcurrentRequests` requests underway."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.failures import Outcome
from ome_routing.observer.polling import PollClient, request_for_url

from .conftest import Handler, Reporter, a_report, seconds

pytestmark = pytest.mark.timeout(20)

StartReporter = Callable[[Handler], Awaitable[Reporter]]


def slow(delay: float) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay)
        return web.Response(text=json.dumps(a_report()))

    return handle


async def test_no_more_requests_are_underway_than_the_budget(reporter: StartReporter) -> None:
    server = await reporter(slow(0.1))
    budget = RequestBudget(2)
    async with PollClient(budget, 65536) as client:
        request = request_for_url(server.url(), "GET")
        results = await asyncio.gather(*(client.poll(request, seconds("2s")) for _ in range(7)))
    assert [r.outcome for r in results] == [Outcome.OK] * 7
    assert len(server.requests) == 7
    assert server.most_in_flight == 2
    assert budget.in_use == 0 and budget.waiting == 0
    assert budget.granted == 7


async def test_a_wait_for_a_slot_longer_than_the_timeout_does_not_fail_the_poll(
    reporter: StartReporter,
) -> None:
    """The timeout starts when the request is sent, not when the poll starts waiting."""
    server = await reporter(slow(0.05))
    budget = RequestBudget(1)
    held = asyncio.Event()
    release = asyncio.Event()

    async def a_probe_holding_the_only_slot() -> None:
        async with budget.slot():
            held.set()
            await release.wait()

    probe = asyncio.create_task(a_probe_holding_the_only_slot())
    await held.wait()
    async with PollClient(budget, 65536) as client:
        poll = asyncio.create_task(
            client.poll(request_for_url(server.url(), "GET"), seconds("200ms"))
        )
        await asyncio.sleep(0.5)
        assert budget.waiting == 1
        assert server.requests == []
        release.set()
        result = await poll
    await probe
    assert result.outcome is Outcome.OK
    assert result.waited >= 0.4
    assert budget.waited_seconds >= 0.4


async def test_a_slot_is_given_back_when_a_poll_fails(closed_port: int) -> None:
    budget = RequestBudget(1)
    async with PollClient(budget, 65536) as client:
        request = request_for_url(f"http://127.0.0.1:{closed_port}/capacity", "GET")
        for _ in range(3):
            result = await client.poll(request, seconds("1s"))
            assert result.outcome is Outcome.UNREACHABLE
    assert budget.in_use == 0
    assert budget.granted == 3


async def test_a_cancelled_poll_gives_its_slot_back(reporter: StartReporter) -> None:
    server = await reporter(slow(5))
    budget = RequestBudget(1)
    async with PollClient(budget, 65536) as client:
        poll = asyncio.create_task(client.poll(request_for_url(server.url(), "GET"), seconds("9s")))
        while not server.requests:
            await asyncio.sleep(0.01)
        assert budget.in_use == 1
        poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await poll
        assert budget.in_use == 0


@pytest.mark.parametrize("limit", [0, -1])
def test_a_budget_needs_a_positive_limit(limit: int) -> None:
    with pytest.raises(ValueError, match=f"maxConcurrentRequests must be positive, got {limit}"):
        RequestBudget(limit)


async def test_a_slot_given_back_goes_to_the_oldest_waiter() -> None:
    """Within one flow, first come, first served: a request that arrives later cannot take it first."""
    budget = RequestBudget(1)
    assert budget.try_acquire()
    order: list[str] = []

    async def wait(name: str) -> None:
        await budget.acquire()
        order.append(name)
        budget.release()

    first = asyncio.create_task(wait("first"))
    await asyncio.sleep(0)
    second = asyncio.create_task(wait("second"))
    await asyncio.sleep(0)
    budget.release()
    assert not budget.try_acquire()  # passed on to "first", not free for a newcomer
    await asyncio.gather(first, second)
    assert order == ["first", "second"]
    assert budget.in_use == 0 and budget.waiting == 0 and budget.granted == 3


async def test_a_cancelled_waiter_leaves_the_queue_and_takes_no_slot() -> None:
    budget = RequestBudget(1)
    assert budget.try_acquire()
    waiter = asyncio.create_task(budget.acquire())
    await asyncio.sleep(0)
    assert budget.waiting == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert budget.waiting == 0
    budget.release()
    assert budget.in_use == 0
    assert budget.try_acquire()


async def test_a_waiter_cancelled_as_its_slot_arrives_passes_the_slot_on() -> None:
    budget = RequestBudget(1)
    assert budget.try_acquire()
    cancelled = asyncio.create_task(budget.acquire())
    following = asyncio.create_task(budget.acquire())
    await asyncio.sleep(0)
    budget.release()  # the slot goes to `cancelled`, which has not run yet
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await following >= 0.0
    assert budget.in_use == 1 and budget.waiting == 0
    budget.release()
    assert budget.in_use == 0


async def test_a_place_in_line_by_callback_takes_its_turn_with_coroutine_waiters() -> None:
    """`wait_for_slot` (the observer's) and `acquire` (the prober's) share one line."""
    budget = RequestBudget(1)
    assert budget.try_acquire()
    order: list[str] = []

    async def wait(name: str) -> None:
        await budget.acquire()
        order.append(name)
        budget.release()

    first = asyncio.create_task(wait("coroutine"))
    await asyncio.sleep(0)
    place = budget.wait_for_slot()
    place.add_done_callback(lambda _: order.append("callback"))
    assert budget.waiting == 2
    budget.release()
    await first
    await place
    assert order == ["coroutine", "callback"]
    assert budget.in_use == 1  # the place's slot is held until given back
    budget.passed(0.25)
    assert budget.granted == 3 and budget.waited_seconds >= 0.25
    budget.release()
    assert budget.in_use == 0


async def test_a_place_in_line_given_up_leaves_the_line_or_gives_its_slot_back() -> None:
    budget = RequestBudget(1)
    assert budget.try_acquire()
    waiting = budget.wait_for_slot()
    budget.stop_waiting(waiting)
    assert budget.waiting == 0 and waiting.cancelled()
    served = budget.wait_for_slot()
    budget.release()  # passed on to `served`
    assert served.done() and budget.in_use == 1
    budget.stop_waiting(served)  # given up after the slot came: the slot goes back
    assert budget.in_use == 0 and budget.try_acquire()
