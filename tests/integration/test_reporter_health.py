"""The reporter's health stand-in: a status switched at run time, and a stall, probed for real."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from click.testing import CliRunner

from ome_routing.cli.reporter import reporter
from ome_routing.core.durations import Duration
from ome_routing.core.proberules import ProbePolicy
from ome_routing.core.probes import ProbeResult, ProbeState
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.polling import PollClient
from ome_routing.observer.prober import Prober
from ome_routing.reporter.health import (
    FileHealth,
    HealthSource,
    SwitchableHealth,
    add_health_route,
    parse_answer,
)
from ome_routing.reporter.server import StaticCount, make_app

POLICY = ProbePolicy(
    path="/v1/models",
    method="GET",
    accept_statuses=(200,),
    gate_statuses=(404, 500, 502, 503, 504),
    period=Duration.parse("1h"),
    # a loopback answer within it even on a loaded machine; "stall" never answers
    timeout=Duration.parse("1s"),
    failure_threshold=1,
    success_threshold=1,
    all_failed_policy="PreserveTraffic",
)


async def serve(source: HealthSource) -> tuple[web.AppRunner, str]:
    app = make_app(StaticCount(2))
    add_health_route(app, source)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def probe(base: str) -> ProbeState:
    states: list[ProbeState] = []
    done = asyncio.Event()

    def seen(key: object, state: ProbeState) -> None:
        states.append(state)
        done.set()

    async with PollClient(RequestBudget(2), 65536) as client:
        prober = Prober(client, seen, clock=lambda: datetime.now(UTC))
        await prober.start()
        try:
            prober.set_target("home", base, POLICY)
            await asyncio.wait_for(done.wait(), 10)
        finally:
            await prober.stop()
    return states[0]


async def test_a_switched_answer_is_what_the_next_probe_sees() -> None:
    health = SwitchableHealth()
    runner, base = await serve(health)
    try:
        assert (await probe(base)).result is ProbeResult.PASSING
        health.switch(503)
        failed = await probe(base)
        assert (failed.result, failed.message) == (ProbeResult.FAILING, "HTTP 503")
        health.switch("stall")
        stalled = await probe(base)
        assert stalled.message == "transport error: timed out after 1s"
        health.switch(200)
        assert (await probe(base)).result is ProbeResult.PASSING
    finally:
        await runner.cleanup()


async def test_a_health_file_switches_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "health"
    runner, base = await serve(FileHealth(path))
    try:
        assert (await probe(base)).result is ProbeResult.PASSING  # no file yet
        path.write_text("503\n")
        assert (await probe(base)).message == "HTTP 503"
        path.write_text("garbage")
        assert (await probe(base)).message == "HTTP 500"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("text", ["99", "600", "ok", ""])
def test_an_answer_is_a_status_or_stall(text: str) -> None:
    with pytest.raises(ValueError):
        parse_answer(text)


def test_the_cli_needs_a_health_path_for_a_health_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        reporter, ["--servable", "2", "--serve-health-file", str(tmp_path / "h")]
    )
    assert result.exit_code == 2
    assert "--serve-health-file needs --serve-health-path" in result.output
