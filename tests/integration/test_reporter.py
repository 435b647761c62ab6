"""The reference reporter, served on loopback and read with the core's report parser."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from click.testing import CliRunner

from ome_routing.cli.reporter import reporter
from ome_routing.core.durations import Duration
from ome_routing.core.report import freshness_failure, parse_report
from ome_routing.reporter.server import CountSource, FileCount, StaticCount, make_app


async def serve(source: CountSource, path: str = "/capacity") -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(make_app(source, path))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_static_count_is_reported_with_a_current_stamp(
    session: aiohttp.ClientSession, method: str
) -> None:
    runner, base = await serve(StaticCount(3))
    try:
        async with session.request(method, base + "/capacity") as response:
            assert response.status == 200
            reading = parse_report(await response.read())
    finally:
        await runner.cleanup()
    assert reading.servable == 3
    assert abs(datetime.now(UTC) - reading.observed_at) < timedelta(seconds=5)


async def test_a_file_count_is_stamped_with_the_files_modification_time(
    session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    count = tmp_path / "servable"
    count.write_text("2\n")
    written = datetime(2026, 9, 28, 10, 0, tzinfo=UTC)
    os.utime(count, (written.timestamp(), written.timestamp()))
    runner, base = await serve(FileCount(count))
    try:
        async with session.get(base + "/capacity") as response:
            reading = parse_report(await response.read())
    finally:
        await runner.cleanup()
    assert (reading.servable, reading.observed_at) == (2, written)


async def test_a_frozen_file_writer_gives_reports_that_go_stale(
    session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """A reporter that freezes must lose its home's ceiling within maxAge."""
    count = tmp_path / "servable"
    count.write_text("4")
    frozen_at = time.time() - 41
    os.utime(count, (frozen_at, frozen_at))
    runner, base = await serve(FileCount(count))
    try:
        async with session.get(base + "/capacity") as response:
            reading = parse_report(await response.read())
    finally:
        await runner.cleanup()
    assert freshness_failure(reading, datetime.now(UTC), Duration.parse("40s")) == (
        "capacity report is stale (at least configured maximum age 40s)"
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read"),
        ("-1", "not a whole number"),
        ("2.5", "not a whole number"),
        ("", "not a whole number"),
    ],
)
async def test_an_unreadable_count_answers_503(
    session: aiohttp.ClientSession, tmp_path: Path, content: str | None, expected: str
) -> None:
    count = tmp_path / "servable"
    if content is not None:
        count.write_text(content)
    runner, base = await serve(FileCount(count))
    try:
        async with session.get(base + "/capacity") as response:
            status, text = response.status, await response.text()
    finally:
        await runner.cleanup()
    assert status == 503
    assert expected in text


async def test_other_paths_are_not_answered(session: aiohttp.ClientSession) -> None:
    runner, base = await serve(StaticCount(1), path="/reports/capacity")
    try:
        async with (
            session.get(base + "/capacity") as wrong,
            session.get(base + "/reports/capacity") as right,
        ):
            assert (wrong.status, right.status) == (404, 200)
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--servable", "1", "--servable-file", "x"],
        ["--servable", "-1"],
        ["--servable", "1", "--path", "capacity"],
    ],
)
def test_the_command_refuses_bad_options(args: list[str]) -> None:
    result = CliRunner().invoke(reporter, args)
    assert result.exit_code == 2, result.output


def _reporter(*args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ome_routing.cli.main", "reporter", *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _announced_port(process: subprocess.Popen[bytes], what: str) -> int:
    assert process.stderr is not None
    for line in process.stderr:
        found = re.search(rf"{what} on http://127\.0\.0\.1:(\d+)/", line.decode())
        if found:
            return int(found.group(1))
    raise AssertionError(f"the reporter exited ({process.wait()}) without saying where it serves")


@pytest.mark.timeout(30)
def test_the_installed_command_serves_reports_on_the_port_it_announces() -> None:
    # port 0: the system picks, and the reporter says which
    process = _reporter("--servable", "5", "--port", "0", "--serve-health-path", "/v1/models")
    try:
        health_port = _announced_port(process, "health")
        port = _announced_port(process, "reporting")
        assert port == health_port
        assert port != 0
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"GET /capacity HTTP/1.0\r\nHost: x\r\n\r\n")
            body = b""
            while chunk := conn.recv(4096):
                body += chunk
        assert parse_report(body.split(b"\r\n\r\n", 1)[1]).servable == 5
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.timeout(30)
def test_a_port_in_use_is_refused_with_the_options_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(reporter, ["--servable", "1", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert (
        f"cannot listen on --host 127.0.0.1 --port {port}: Address already in use" in result.output
    )
