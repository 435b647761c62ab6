"""The schedule rings once for the homes that fall due close together.

At 10,000 polls/s homes fall due about 0.1 ms apart; a timer and a wake-up of the event
loop for each would cost more than the poll. The schedule rings its slack after the first
home due, and that ring sends every home due by then; a home due later waits for a ring
of its own. The slack follows the rate of polls (`ring_slack`): the sparser they are,
the longer a ring waits, within bounds.
"""

from __future__ import annotations

import asyncio
import statistics
from types import SimpleNamespace
from typing import cast

import pytest

from ome_routing.observer import PollClient, RequestBudget, dispatch
from ome_routing.observer.dispatch import MAX_RING_SLACK, RATE_WINDOW, RING_POLLS, Dispatcher
from ome_routing.observer.homes import Home, Phase

pytestmark = [
    pytest.mark.timeout(10),
    pytest.mark.skipif(
        not dispatch.__file__ or not dispatch.__file__.endswith(".py"),
        reason="subclasses Dispatcher, which the compiled poll path (mypyc) does not allow",
    ),
]


class Recorded(Dispatcher):
    """A schedule whose polls are only recorded (each gives its slot back at once)."""

    def __init__(self, client: PollClient) -> None:
        super().__init__(client)
        self.sent: list[tuple[Home, float]] = []
        self.rings = 0

    def _fly(self, home: Home, now: float) -> None:
        self.sent.append((home, now))
        self._poller.budget.release()

    def _ring(self) -> None:
        self.rings += 1
        super()._ring()


async def test_homes_due_within_the_slack_go_out_in_one_ring() -> None:
    slack = MAX_RING_SLACK  # a new schedule has seen no rate yet
    loop = asyncio.get_running_loop()
    async with PollClient(RequestBudget(16), 65536) as client:
        schedule = Recorded(client)
        schedule._loop, schedule._phase = loop, Phase.RUNNING
        assert schedule._slack == slack
        first = loop.time() + 0.05
        homes = [cast(Home, SimpleNamespace(retired=False, due=0.0, flow="")) for _ in range(5)]
        # four due within 60% of the slack from the first, the fifth three slacks after it
        for index, home in enumerate(homes[:4]):
            schedule._schedule(home, first + index * 0.2 * slack)
        schedule._schedule(homes[4], first + 3 * slack)
        schedule._set_timer(loop)
        async with asyncio.timeout(5):
            while len(schedule.sent) < len(homes):
                await asyncio.sleep(0.01)
    assert schedule.rings == 2
    assert [home for home, _ in schedule.sent] == homes  # earliest first
    assert all(now >= home.due for home, now in schedule.sent)  # none before it is due
    # the first four together, in the first ring, which came after the last of them was
    # due; the fifth in the second
    assert len({now for _, now in schedule.sent[:4]}) == 1
    assert schedule.sent[0][1] >= homes[3].due
    assert schedule.sent[4][1] > schedule.sent[0][1]


async def test_the_slack_narrows_as_the_polls_come_faster_and_a_poll_ending_sends_none() -> None:
    """4,000 homes due a second for a little over two windows: after the first window the
    schedule rings 30 ms after the first home due (120 polls' worth), not 50; and the
    polls that end send nothing themselves (every poll goes out from a ring)."""
    rate, span = 4_000.0, 2 * RATE_WINDOW + 0.3
    loop = asyncio.get_running_loop()
    # slots for every poll of a ring: none waits in the budget's line
    async with PollClient(RequestBudget(1024), 65536) as client:
        schedule = Ringing(client)
        schedule._loop, schedule._phase = loop, Phase.RUNNING
        start = loop.time() + 0.05
        schedule._counted_since = start
        count = int(rate * span)
        homes = [cast(Home, SimpleNamespace(retired=False, due=0.0, flow="")) for _ in range(count)]
        for index, home in enumerate(homes):
            schedule._schedule(home, start + index / rate)
        schedule._set_timer(loop)
        async with asyncio.timeout(8):
            while len(schedule.sent) < count:
                await asyncio.sleep(0.05)
    assert schedule.pumped_outside_rings == 0
    # a ring sends what is due by then, never a home before its time
    assert all(now >= home.due for home, now in schedule.sent)
    # the first window at the widest slack; once a window has passed, about 120 polls'
    # worth, and so it stays while the rate does
    slacks = schedule.slacks
    assert slacks[0] == MAX_RING_SLACK
    changed = next(i for i, slack in enumerate(slacks) if slack != MAX_RING_SLACK)
    assert all(slack == pytest.approx(RING_POLLS / rate, rel=0.25) for slack in slacks[changed:])
    assert schedule.changed_at[0] >= start + RATE_WINDOW
    # each ring then carries about RING_POLLS (more if the loop comes late: a fixed 10 ms
    # would carry 40)
    carried = schedule.carried[changed:]
    assert RING_POLLS / 2 <= statistics.median(carried) <= 2 * RING_POLLS, carried


class Ringing(Recorded):
    """A recorded schedule that notes the slack of each ring, and any pump not rung."""

    def __init__(self, client: PollClient) -> None:
        super().__init__(client)
        #: each ring's slack after it rang, and how many polls it sent
        self.slacks: list[float] = []
        self.carried: list[int] = []
        #: when the slack first changed
        self.changed_at: list[float] = []
        self.pumped_outside_rings = 0
        self._ringing = False

    def _fly(self, home: Home, now: float) -> None:
        self.sent.append((home, now))
        assert self._loop is not None
        self._loop.call_soon(self._landed, home)

    def _landed(self, home: Home) -> None:
        """The poll ends on a later turn of the loop, as an answer does."""
        self._poller.budget.release()
        self._next_after(home)

    def _ring(self) -> None:
        before, sent = self._slack, len(self.sent)
        self._ringing = True
        try:
            super()._ring()
        finally:
            self._ringing = False
        assert self._loop is not None
        if self._slack != before and not self.changed_at:
            self.changed_at.append(self._loop.time())
        self.slacks.append(self._slack)
        self.carried.append(len(self.sent) - sent)

    def _pump(self) -> None:
        if not self._ringing:
            self.pumped_outside_rings += 1
        super()._pump()
