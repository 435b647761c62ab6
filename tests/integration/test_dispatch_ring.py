"""The schedule rings once for the homes that fall due close together.

At 10,000 polls/s homes fall due about 0.1 ms apart; a timer and a wake-up of the event
loop for each would cost more than the poll. The schedule rings `RING_SLACK` after the
first home due, and that ring sends every home due by then; a home due later waits for a
ring of its own.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import cast

import pytest

from ome_routing.observer import PollClient, RequestBudget, dispatch
from ome_routing.observer.dispatch import RING_SLACK, Dispatcher
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
    assert RING_SLACK == 0.01
    loop = asyncio.get_running_loop()
    async with PollClient(RequestBudget(16), 65536) as client:
        schedule = Recorded(client)
        schedule._loop, schedule._phase = loop, Phase.RUNNING
        first = loop.time() + 0.05
        homes = [cast(Home, SimpleNamespace(retired=False, due=0.0, flow="")) for _ in range(5)]
        # four due within 60% of the slack from the first, the fifth three slacks after it
        for index, home in enumerate(homes[:4]):
            schedule._schedule(home, first + index * 0.2 * RING_SLACK)
        schedule._schedule(homes[4], first + 3 * RING_SLACK)
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
