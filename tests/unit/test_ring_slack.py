"""How late the schedule's ring may come at a rate of polls (`observer.dispatch.ring_slack`).

The ring waits for about `RING_POLLS` polls' worth at the rate of the last window, within
10 and 50 ms; `tests/integration/test_dispatch_ring.py` has the schedule that uses it.
"""

from __future__ import annotations

import pytest

from ome_routing.observer.dispatch import (
    MAX_RING_SLACK,
    MIN_RING_SLACK,
    RING_POLLS,
    ring_slack,
)


def test_the_slack_carries_ring_polls_at_the_rate_within_its_bounds() -> None:
    assert (MIN_RING_SLACK, MAX_RING_SLACK, RING_POLLS) == (0.01, 0.05, 120)
    assert ring_slack(0.0) == MAX_RING_SLACK  # nothing polled yet: the widest
    assert ring_slack(100.0) == MAX_RING_SLACK
    assert ring_slack(RING_POLLS / MAX_RING_SLACK) == MAX_RING_SLACK
    assert ring_slack(3_000.0) == pytest.approx(0.04)
    assert ring_slack(4_000.0) == pytest.approx(0.03)
    assert ring_slack(RING_POLLS / MIN_RING_SLACK) == pytest.approx(MIN_RING_SLACK)
    assert ring_slack(100_000.0) == MIN_RING_SLACK
