"""The Kubernetes-backed reporter's health checks, against model-server stand-ins on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import aiohttp
from aiohttp import web

from ome_routing.reporter.healthchecks import CheckResult, HealthChecks

from .conftest import Handler, Reporter

Start = Callable[[Handler], Awaitable[Reporter]]
T0 = datetime(2026, 9, 28, 10, 0, tzinfo=UTC)


def checks(**kwargs: object) -> tuple[HealthChecks, list[CheckResult]]:
    seen: list[CheckResult] = []
    # a loopback answer comes within 1s even on a loaded machine; `slow` takes 2s
    options: dict[str, object] = {"timeout": 1.0, "period": 1.0, "concurrency": 16}
    options.update(kwargs)
    health = HealthChecks(
        "/health",
        clock=lambda: T0,
        on_result=seen.append,
        **options,  # type: ignore[arg-type]
    )
    return health, seen


def address(server: Reporter) -> str:
    return server.base.removeprefix("http://")


async def one_round(health: HealthChecks, targets: dict[str, str] | None) -> bool:
    async with aiohttp.ClientSession(trust_env=False) as session:
        return await health.round(session, lambda: targets)


async def test_only_a_2xx_in_time_passes(reporter: Start) -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        status = {"ok": 200, "empty": 204, "down": 503, "moved": 302}[request.query["as"]]
        if status == 302:
            raise web.HTTPFound("/health?as=ok")
        return web.Response(status=status)

    async def slow(_: web.Request) -> web.StreamResponse:
        await asyncio.sleep(2)
        return web.Response()

    server = await reporter(answer)
    stalled = await reporter(slow)
    health, seen = checks()
    health.path = "/health?as=ok"
    targets = {"ok": address(server)}
    assert await one_round(health, targets)
    assert health.results == {"ok": True}
    for case, passed in [("empty", True), ("down", False), ("moved", False)]:
        health.path = f"/health?as={case}"
        await one_round(health, {case: address(server)})
        assert health.results == {case: passed}, case
    health.path = "/health"
    await one_round(health, {"slow": address(stalled)})
    assert health.results == {"slow": False}
    assert seen == [
        CheckResult.PASSED,
        CheckResult.PASSED,
        CheckResult.FAILED,
        CheckResult.FAILED,
        CheckResult.UNREACHABLE,
    ]


async def test_a_refused_connection_is_unreachable(closed_port: int) -> None:
    health, seen = checks()
    await one_round(health, {"gone": f"127.0.0.1:{closed_port}"})
    assert health.results == {"gone": False}
    assert seen == [CheckResult.UNREACHABLE]


async def test_checks_run_concurrently_but_no_more_than_the_bound(reporter: Start) -> None:
    release = asyncio.Event()

    async def held(_: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response()

    server = await reporter(held)
    health, _ = checks(concurrency=3, timeout=5.0)
    pods = {f"pod-{i}": address(server) for i in range(8)}
    round_ = asyncio.create_task(one_round(health, pods))

    async def three_in_flight() -> None:
        while server.in_flight < 3:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(three_in_flight(), 5)
    release.set()
    await round_
    assert server.most_in_flight == 3
    assert health.results == dict.fromkeys(pods, True)


async def test_a_round_replaces_the_last_rounds_results_and_stamps_its_start(
    reporter: Start,
) -> None:
    async def ok(_: web.Request) -> web.StreamResponse:
        return web.Response()

    server = await reporter(ok)
    health, _ = checks()
    assert health.round_started_at is None
    await one_round(health, {"a": address(server), "b": address(server)})
    await one_round(health, {"b": address(server)})
    assert health.results == {"b": True}
    assert health.round_started_at == T0


async def test_a_round_is_skipped_while_the_view_is_not_live(reporter: Start) -> None:
    async def ok(_: web.Request) -> web.StreamResponse:
        return web.Response()

    server = await reporter(ok)
    health, _ = checks()
    await one_round(health, {"a": address(server)})
    health._clock = lambda: T0.replace(hour=11)
    assert not await one_round(health, None)
    assert health.results == {"a": True}
    assert health.round_started_at == T0
