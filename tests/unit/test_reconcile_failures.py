"""A reconcile that fails leaves nothing for the garbage collector.

A reconcile runs in a task of its own (so that a stopping worker lets it finish); when it
fails, the task keeps the error, whose traceback holds the frame that awaited the task.
If that frame still held the task, the four would make a cycle, and the task, alive
through the reconcile's requests, is in the collector's oldest generation by then: only
a full collection would free it. Under reports that flap, the publisher's writes meet
the routing controller's and are retried several times a second.
"""

from __future__ import annotations

import asyncio
import gc

import pytest

from ome_routing.kube.controller import _finish_when_cancelled


class _Conflict(Exception):
    pass


async def _conflicting() -> str:
    await asyncio.sleep(0)
    raise _Conflict("the object has been modified")


async def test_a_failed_reconcile_leaves_no_cycle_for_the_collector() -> None:
    failures = 0
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            try:
                await _finish_when_cancelled(_conflicting(), 1.0)
            except _Conflict:
                failures += 1
        garbage = gc.collect()
    finally:
        gc.enable()
    assert failures == 3
    assert garbage == 0


async def test_a_worker_cancelled_twice_still_lets_its_reconcile_reach_its_status() -> None:
    """A stopping controller cancels each worker through the `gather` that runs them, and
    once more in its own `finally`: the second must not cut the grace short, or a map is
    left with its new spec and the conditions of the old one."""
    spec_written = asyncio.Event()
    answered = asyncio.Event()
    steps: list[str] = []

    async def reconcile() -> str:
        steps.append("spec")
        spec_written.set()
        await answered.wait()  # the status write's answer
        steps.append("status")
        return "ok"

    worker = asyncio.create_task(_finish_when_cancelled(reconcile(), 5.0))
    await spec_written.wait()
    worker.cancel()
    for _ in range(3):  # the worker is in its grace now
        await asyncio.sleep(0)
    worker.cancel()
    await asyncio.sleep(0)
    answered.set()
    with pytest.raises(asyncio.CancelledError):
        await worker
    assert steps == ["spec", "status"]


async def test_a_reconcile_past_the_grace_is_cancelled_and_its_error_dropped() -> None:
    ended: list[str] = []

    async def stuck() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return "ok"

    async def failing() -> str:
        await asyncio.sleep(0.01)
        ended.append("failed")
        raise _Conflict("the object has been modified")

    for work in (stuck(), failing()):
        worker = asyncio.create_task(_finish_when_cancelled(work, 0.2))
        await asyncio.sleep(0)
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):  # not the reconcile's error
            await worker
    # the stuck one was cancelled at the end of the grace, not awaited for its minute
    assert ended == ["cancelled", "failed"]
