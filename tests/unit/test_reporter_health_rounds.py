"""The health checks' rounds: one period apart at most, on a fast-forwarded clock."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime

import pytest

from ome_routing.reporter.healthchecks import HealthChecks

T0 = datetime(2026, 9, 28, 10, 0, tzinfo=UTC)


def checks(period: float) -> HealthChecks:
    return HealthChecks("/health", timeout=0.5, period=period, concurrency=4, clock=lambda: T0)


@pytest.mark.looptime
async def test_rounds_start_no_more_often_than_the_period() -> None:
    """With nothing to check, rounds are instant: they still start one period apart."""
    loop = asyncio.get_running_loop()
    starts: list[float] = []

    def targets() -> dict[str, str]:
        starts.append(loop.time())
        return {}

    health = checks(period=5.0)
    runner = asyncio.create_task(health.run(targets))
    await asyncio.sleep(22)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    assert [round(b - a, 3) for a, b in itertools.pairwise(starts)] == [5.0, 5.0, 5.0, 5.0]
