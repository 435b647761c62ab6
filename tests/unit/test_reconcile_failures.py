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
