"""`ome-routing check-reporter`: one poll the controller's way, its output and exit code."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from click.testing import CliRunner, Result

from ome_routing.cli.main import main
from ome_routing.core.report import FUTURE, format_rfc3339, stale_reason

from .conftest import ConnectionHandler, Handler, Reporter, seconds

pytestmark = pytest.mark.timeout(20)

StartReporter = Callable[[Handler], Awaitable[Reporter]]
StartRaw = Callable[[ConnectionHandler], Awaitable[str]]


async def check_reporter(*args: str) -> Result:
    """Run the command in a thread, since it runs its own event loop, while ours serves."""
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, main, ["check-reporter", *args])


def report_aged(age: timedelta, servable: int = 4) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        stamp = datetime.now(UTC) - age
        return web.Response(
            text=json.dumps({"servable": servable, "observedAt": format_rfc3339(stamp)})
        )

    return handle


def answering(body: str, status: int = 200, **headers: str) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, status=status, headers=headers)

    return handle


async def test_a_good_report_prints_the_count_the_stamp_and_its_age(
    reporter: StartReporter,
) -> None:
    server = await reporter(report_aged(timedelta(seconds=2), servable=3))
    result = await check_reporter(server.url())
    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        r"servable 3, observedAt \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z \(2(\.\d+)?s old\)\n",
        result.output,
    )


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_the_method_is_the_one_asked_for(reporter: StartReporter, method: str) -> None:
    server = await reporter(report_aged(timedelta(seconds=1)))
    result = await check_reporter(server.url(), "--method", method)
    assert result.exit_code == 0, result.output
    assert [r.method for r in server.requests] == [method]


@pytest.mark.parametrize(
    ("handler", "options", "reason"),
    [
        (answering("not found", 404), [], "capacity endpoint returned HTTP 404"),
        (
            answering("", 302, Location="/elsewhere"),
            [],
            "capacity endpoint returned HTTP 302",
        ),
        (answering("", 401), [], "capacity endpoint returned HTTP 401"),
        (
            answering("{"),
            [],
            "capacity response is not a valid report: unexpected end of JSON input",
        ),
        (
            answering('{"servable": -1, "observedAt": "2026-09-28T10:00:00Z"}'),
            [],
            "capacity report is negative (-1)",
        ),
        (report_aged(timedelta(seconds=45)), [], stale_reason(seconds("30s"))),
        (
            report_aged(timedelta(seconds=45)),
            ["--max-age", "1m"],
            None,
        ),
        (report_aged(timedelta(seconds=-60)), [], FUTURE),
        (
            answering(" " * 101),
            ["--max-response-bytes", "100"],
            "reading capacity response: response exceeds configured limit of 100 bytes",
        ),
    ],
    ids=[
        "404",
        "redirect",
        "401",
        "invalid JSON",
        "negative",
        "stale",
        "old but within --max-age",
        "future",
        "too long",
    ],
)
async def test_a_failed_poll_prints_the_fallback_reason(
    reporter: StartReporter, handler: Handler, options: list[str], reason: str | None
) -> None:
    server = await reporter(handler)
    result = await check_reporter(server.url(), *options)
    if reason is None:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 1
    assert result.output == reason + "\n"


async def test_a_reporter_that_never_answers_times_out(raw_server: StartRaw) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    base = await raw_server(silent)
    result = await check_reporter(base + "/capacity", "--timeout", "200ms")
    assert result.exit_code == 1
    assert result.output == "capacity endpoint unreachable: timed out after 200ms\n"


async def test_a_closed_port_is_unreachable(closed_port: int) -> None:
    result = await check_reporter(f"http://127.0.0.1:{closed_port}/capacity")
    assert (result.exit_code, result.output) == (
        1,
        "capacity endpoint unreachable: connection refused\n",
    )


async def test_a_url_that_cannot_be_polled_is_an_invalid_target() -> None:
    result = await check_reporter("ftp://127.0.0.1/capacity")
    assert (result.exit_code, result.output) == (
        1,
        'capacity target is invalid: endpoint URL "ftp://127.0.0.1/capacity" must use HTTP or HTTPS\n',
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--method", "HEAD"], "Invalid value for '--method': 'HEAD' is not one of 'GET', 'POST'."),
        (
            ["--timeout", "10"],
            'Invalid value for \'--timeout\': "10" is not a duration (use forms like "30s", "5m")',
        ),
        (["--timeout", "0s"], "Invalid value for '--timeout': \"0s\" must be positive"),
        (
            ["--max-age", "soon"],
            'Invalid value for \'--max-age\': "soon" is not a duration (use forms like "30s", "5m")',
        ),
        (
            ["--max-response-bytes", "0"],
            "Invalid value for '--max-response-bytes': 0 is not in the range x>=1.",
        ),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(options: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["check-reporter", "http://127.0.0.1:9/capacity", *options])
    assert result.exit_code == 2
    assert result.output.rstrip("\n").endswith("Error: " + message)
