"""The controller's work queue: deduplicated keys, one worker per key, delayed requeues."""

from __future__ import annotations

import asyncio

import pytest

from ome_routing.kube.workqueue import WorkQueue


async def test_a_key_added_twice_while_waiting_is_handed_out_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert [await queue.get(), await queue.get()] == ["a", "b"]
    assert len(queue) == 0


async def test_a_key_added_while_held_comes_back_after_done_and_not_before() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    held = await queue.get()
    queue.add("a")
    assert len(queue) == 0, "a held key must not be handed to a second worker"
    queue.done(held)
    assert await asyncio.wait_for(queue.get(), 1) == "a"


async def test_done_without_a_new_add_does_not_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.done(await queue.get())
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.05)


@pytest.mark.looptime
async def test_add_after_fires_at_the_earliest_requested_time() -> None:
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("a", 30)
    queue.add_after("a", 10)
    queue.add_after("a", 20)
    assert await queue.get() == "a"
    assert loop.time() - start == pytest.approx(10)


@pytest.mark.looptime
async def test_an_immediate_add_replaces_a_pending_timer() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 10)
    queue.add("a")
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 60)
