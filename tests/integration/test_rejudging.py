"""The moments to judge homes again between polls, on one timer for every home.

A moment stands for the poll that set it: a home polled again since, one with a poll
underway, or one retired, is passed over when the moment comes.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from datetime import UTC, datetime
from typing import cast

import pytest

from ome_routing.core.capacity import empty_window, verdict
from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.observer import PollClient, RequestBudget
from ome_routing.observer.flight import TaggedFlight
from ome_routing.observer.homes import Home, home_request, window_settings
from ome_routing.observer.rejudging import RING_BATCH, Rejudging
from ome_routing.observer.request import PollRequest

pytestmark = pytest.mark.timeout(10)

ENDPOINT = "http://127.0.0.1:9"
POLICY = CapacityPolicy(
    path="/capacity",
    method="GET",
    format="Report",
    samples=3,
    quorum=1,
    period=Duration.parse("10s"),
    timeout=Duration.parse("1s"),
    max_age=Duration.parse("30s"),
)
_KEYS = itertools.count()


class _Nowhere:
    """The landing of a poll that never ends."""

    def _landed(self, *_: object) -> None:
        raise AssertionError("the poll was never sent")


def a_home(picked: float = 1.0) -> Home:
    """A home as the observer holds one (real objects: the compiled build checks types)."""
    window = empty_window(window_settings(POLICY))
    request = home_request(ENDPOINT, POLICY)
    key = ("default", f"isvc-{next(_KEYS)}", "worker-a")
    home = Home(key, ENDPOINT, POLICY, request, window, verdict(window, datetime.now(UTC)))
    home.picked = picked
    return home


async def judged_after(rejudging: Rejudging, judged: list[Home], count: int) -> None:
    async with asyncio.timeout(5):
        while len(judged) < count:
            await asyncio.sleep(0.005)


async def test_homes_are_judged_again_at_their_moments_earliest_first() -> None:
    loop = asyncio.get_running_loop()
    judged: list[Home] = []
    rejudging = Rejudging(judged.append)
    homes = [a_home() for _ in range(3)]
    start = loop.time()
    # added out of order: the later moments first
    rejudging.add(loop, homes[2], start + 0.06)
    rejudging.add(loop, homes[1], start + 0.04)
    rejudging.add(loop, homes[0], start + 0.02)
    await judged_after(rejudging, judged, 3)
    assert judged == homes
    # an event loop runs a timer that falls due within its clock's resolution (uvloop's
    # loop.time() counts whole milliseconds), so the last may run up to 1 ms before 0.06
    assert loop.time() >= start + 0.06 - 0.001


async def test_a_moment_made_moot_by_a_later_poll_a_poll_underway_or_retirement_is_passed_over() -> (
    None
):
    loop = asyncio.get_running_loop()
    judged: list[Home] = []
    rejudging = Rejudging(judged.append)
    polled_again, underway, retired, kept = a_home(), a_home(), a_home(), a_home()
    at = loop.time() + 0.02
    for home in (polled_again, underway, retired, kept):
        rejudging.add(loop, home, at)
    polled_again.picked = 2.0
    retired.retired = True
    async with PollClient(RequestBudget(16), 65536) as client:
        # a poll underway (never sent: only its presence counts)
        request = cast(PollRequest, underway.request)
        underway.flight = TaggedFlight(client.sender, request, POLICY.timeout, _Nowhere(), underway)
        await judged_after(rejudging, judged, 1)
        await asyncio.sleep(0.03)
    assert judged == [kept]


async def test_a_home_judged_again_may_set_its_next_moment() -> None:
    loop = asyncio.get_running_loop()
    judged: list[Home] = []
    rejudging: Rejudging

    def judge(home: Home) -> None:
        judged.append(home)
        if len(judged) == 1:
            rejudging.add(loop, home, loop.time() + 0.01)

    rejudging = Rejudging(judge)
    home = a_home()
    rejudging.add(loop, home, loop.time() + 0.01)
    await judged_after(rejudging, judged, 2)
    assert judged == [home, home]


async def test_clearing_calls_every_moment_off() -> None:
    loop = asyncio.get_running_loop()
    judged: list[Home] = []
    rejudging = Rejudging(judged.append)
    rejudging.add(loop, a_home(), loop.time() + 0.01)
    rejudging.clear()
    await asyncio.sleep(0.05)
    assert judged == []


async def test_a_bunch_of_moments_is_judged_a_batch_a_turn_and_none_waits_for_a_later_moment() -> (
    None
):
    """Readings stamped to the second age out together: thousands of homes at one moment.
    Judged in one turn, they would hold up every poll due meanwhile."""
    loop = asyncio.get_running_loop()
    turn = 0
    ticking = True

    def tick() -> None:  # counts the event loop's turns
        nonlocal turn
        turn += 1
        if ticking:
            loop.call_soon(tick)

    judged_in: list[int] = []
    rejudging: Rejudging

    def judge(home: Home) -> None:
        judged_in.append(turn)
        if len(judged_in) == 1:  # a home judged sets its next moment, well after the bunch
            rejudging.add(loop, home, loop.time() + 60)

    rejudging = Rejudging(judge)
    at = loop.time() + 0.01
    for _ in range(2 * RING_BATCH + 10):
        rejudging.add(loop, a_home(), at)
    loop.call_soon(tick)
    await judged_after(rejudging, cast(list[Home], judged_in), 2 * RING_BATCH + 10)
    ticking = False
    assert sorted(Counter(judged_in).values()) == [10, RING_BATCH, RING_BATCH]
    rejudging.clear()
