"""Request time limits on one shared timer: they behave as `asyncio.timeout` does.

`within` uses a limit the way a poll does: `arm`, the work, `disarm` whatever happens, and
a cancellation that `disarm` owns up to becomes a timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ome_routing.observer.deadlines import Deadlines

# Virtual time: the limits and the work they bound are compared on the loop's clock,
# which a loaded machine cannot stretch.
pytestmark = [pytest.mark.timeout(10), pytest.mark.looptime]


async def within(deadlines: Deadlines, seconds: float, work: float) -> str:
    """Sleep `work` seconds under a limit `seconds` from now; say how it ended."""
    loop = asyncio.get_running_loop()
    limit = deadlines.arm(loop.time() + seconds)
    timed_out = False
    try:
        try:
            await asyncio.sleep(work)
        finally:
            timed_out = deadlines.disarm(limit)
    except asyncio.CancelledError:
        if timed_out:
            return "timed out"
        raise
    return "done"


async def test_a_body_that_outlasts_its_limit_raises_timeout_error() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    assert await within(deadlines, 0.05, 5) == "timed out"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    assert len(deadlines) == 0


async def test_a_body_that_ends_in_time_is_left_alone() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    assert await within(deadlines, 0.2, 0.01) == "done"
    await asyncio.sleep(0.3)  # past the limit: nothing is cancelled later
    assert len(deadlines) == 0


async def test_each_limit_expires_at_its_own_moment_whatever_the_order() -> None:
    """A shorter limit set after a longer one still ends first; the longer one still ends."""
    deadlines = Deadlines(asyncio.get_running_loop())
    loop = asyncio.get_running_loop()
    ended: dict[str, float] = {}

    async def timed(name: str, seconds: float) -> None:
        start = loop.time()
        assert await within(deadlines, seconds, 5) == "timed out"
        ended[name] = loop.time() - start

    long = asyncio.create_task(timed("long", 0.3))
    await asyncio.sleep(0.01)
    short = asyncio.create_task(timed("short", 0.05))
    await asyncio.gather(long, short)
    assert ended["short"] == pytest.approx(0.05)
    assert ended["long"] == pytest.approx(0.3)


async def test_limits_keep_expiring_after_earlier_ones_ended_in_time() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    results = await asyncio.gather(
        within(deadlines, 0.05, 0.01),
        within(deadlines, 0.1, 5),
        within(deadlines, 0.15, 0.01),
        within(deadlines, 0.2, 5),
    )
    assert list(results) == ["done", "timed out", "done", "timed out"]


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    task = asyncio.create_task(within(deadlines, 5, 5))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(deadlines) == 0


async def test_a_limit_already_past_expires_at_the_next_turn() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    assert await within(deadlines, -1, 5) == "timed out"


class Calling:
    """A limit that calls back, as a poll sent as callbacks is its own limit."""

    def __init__(self, when: float, on_expire: Callable[[], None] = lambda: None) -> None:
        self.when = when
        self.on_expire = on_expire
        self.expired_at: float | None = None

    def expire(self) -> None:
        self.expired_at = asyncio.get_running_loop().time()
        self.on_expire()


async def test_a_limit_that_calls_back_expires_at_its_moment_unless_dropped() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    start = loop.time()
    kept, dropped = Calling(start + 0.1), Calling(start + 0.05)
    deadlines.add(kept)
    deadlines.add(dropped)
    deadlines.drop(dropped)
    await asyncio.sleep(0.2)
    assert kept.expired_at is not None and kept.expired_at - start == pytest.approx(0.1, abs=0.01)
    assert dropped.expired_at is None
    assert len(deadlines) == 0


async def test_a_limit_armed_by_an_expiring_one_expires_at_its_own_moment() -> None:
    """An expiry that starts the next request arms its limit against the timer it left."""
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    start = loop.time()
    following = Calling(start + 0.3)
    first = Calling(start + 0.1, lambda: deadlines.add(following))
    later = Calling(start + 0.5)
    deadlines.add(first)
    deadlines.add(later)
    await asyncio.sleep(0.6)
    assert following.expired_at is not None and later.expired_at is not None
    assert following.expired_at - start == pytest.approx(0.3, abs=0.01)
    assert later.expired_at - start == pytest.approx(0.5, abs=0.01)
