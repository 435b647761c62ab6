"""`ome-routing check-reporter URL`: poll a capacity reporter once, as the controller would.

The poll takes the controller's own path (`PollClient.poll`: no credentials, no
redirects, no decompression, the byte cap, the timeout), and the report is judged
against `--max-age` with the wall clock. Exit 0 with the servable count, the stamp and
its age on stdout; exit 1 with the exact `fallbackReason` the TrafficMap would carry on
stderr. Bad options are click usage errors (exit 2) naming the option and the value.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import click

from ome_routing.cli.params import DurationParam
from ome_routing.core.durations import MILLISECOND, Duration
from ome_routing.core.report import Reading, format_rfc3339, freshness_failure
from ome_routing.observer import PollClient, PollFailure, RequestBudget, request_for_url
from ome_routing.observer.homes import Clock, wall_clock


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A reading and its age, or the fallback reason."""

    reading: Reading | None
    age: Duration | None
    reason: str | None


async def check_reporter_once(
    url: str,
    *,
    method: str = "GET",
    timeout: Duration,
    max_age: Duration,
    max_response_bytes: int,
    clock: Clock = wall_clock,
) -> CheckResult:
    """One poll of `url`, judged as the controller judges a reading."""
    try:
        request = request_for_url(url, method)
    except PollFailure as failure:
        return CheckResult(None, None, failure.reason)
    async with PollClient(RequestBudget(1), max_response_bytes) as client:
        result = await client.poll(request, timeout)
    if result.reading is None:
        return CheckResult(None, None, result.reason)
    now = clock()
    stale_or_future = freshness_failure(result.reading, now, max_age)
    if stale_or_future is not None:
        return CheckResult(result.reading, None, stale_or_future)
    age = result.reading.age(now)
    whole_ms = (age.days * 86_400_000) + age.seconds * 1000 + age.microseconds // 1000
    return CheckResult(result.reading, Duration(whole_ms * MILLISECOND), None)


def format_success(reading: Reading, age: Duration) -> str:
    return (
        f"servable {reading.servable}, observedAt {format_rfc3339(reading.observed_at)} ({age} old)"
    )


@click.command("check-reporter")
@click.argument("url")
@click.option(
    "--method",
    type=click.Choice(["GET", "POST"]),
    default="GET",
    show_default=True,
    help="The poll's method.",
)
@click.option(
    "--timeout",
    type=DurationParam(positive=True),
    default="3s",
    show_default=True,
    help="How long the poll can take, from sending the request.",
)
@click.option(
    "--max-age",
    type=DurationParam(positive=True),
    default="30s",
    show_default=True,
    help="How long a report counts, from its observedAt.",
)
@click.option(
    "--max-response-bytes",
    type=click.IntRange(min=1),
    default=65536,
    show_default=True,
    help="The most bytes read from the answer (routing.observer.maxResponseBytes).",
)
def check_reporter(
    url: str, method: str, timeout: Duration, max_age: Duration, max_response_bytes: int
) -> None:
    """Poll the capacity reporter at URL once, the way the controller does.

    URL is the whole poll URL: the entry's endpoint followed by the poll's path, such as
    http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com/capacity. Prints the servable count
    and the report's age, or the fallbackReason the TrafficMap would carry (exit 1).
    """
    result = asyncio.run(
        check_reporter_once(
            url,
            method=method,
            timeout=timeout,
            max_age=max_age,
            max_response_bytes=max_response_bytes,
        )
    )
    if result.reason is not None:
        click.echo(result.reason, err=True)
        raise SystemExit(1)
    assert result.reading is not None and result.age is not None
    click.echo(format_success(result.reading, result.age))
