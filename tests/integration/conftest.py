"""Reporters on loopback that behave and misbehave, and a resolver that never asks DNS.

`reporter` starts an aiohttp.web server on 127.0.0.1 whose routes a test sets;
`raw_server` starts a bare asyncio server whose connection handler a test writes, for
answers no web framework would send (silence, stalled bodies, broken framing).

Every test runs on both event loops the controller may run on: uvloop's, and asyncio's
own where uvloop is missing.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from ome_routing.core.durations import Duration
from ome_routing.core.report import format_rfc3339
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.eventloop import loop_factory
from ome_routing.observer.polling import PollClient

LOOPBACK = "127.0.0.1"
#: A name the test resolver refuses; `.invalid` never resolves anywhere (RFC 6761).
UNRESOLVABLE = "reporter.invalid"
#: A name the test resolver maps to loopback.
LOCAL_NAME = "reporter.test"
NOW = datetime(2026, 9, 28, 10, 0, 0, tzinfo=UTC)


def a_report(servable: int = 4, observed_at: datetime | None = None) -> dict[str, Any]:
    """A Report body, observed one second before `NOW` unless told otherwise."""
    stamp = observed_at if observed_at is not None else NOW - timedelta(seconds=1)
    return {"servable": servable, "observedAt": format_rfc3339(stamp)}


class LoopbackResolver(AbstractResolver):
    """Resolves `reporter.test` to 127.0.0.1 and fails every other name, with no query."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        if host == LOCAL_NAME:
            return [
                ResolveResult(
                    hostname=host,
                    host=LOOPBACK,
                    port=port,
                    family=socket.AF_INET,
                    proto=0,
                    flags=socket.AI_NUMERICHOST,
                )
            ]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async def close(self) -> None:
        return None


@dataclass
class Reporter:
    """A running loopback web server; `requests` records what each request carried."""

    base: str
    app: web.Application
    requests: list[web.Request] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0

    def url(self, path: str = "/capacity") -> str:
        return self.base + path


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The loops of each test: uvloop's, as the controller's, and asyncio's, its fallback.

    The time limits' own tests compare moments a float rounding apart, and uvloop's clock
    counts whole milliseconds, so that `start + 0.3 - start` can be 0.29999...: they run
    on asyncio's loop only (the polls' timeouts run on both through the other tests).
    """
    factories: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {}
    factory = loop_factory("uvloop")
    if factory is not None and item.path.name != "test_deadlines.py":
        factories["uvloop"] = factory
    factories["asyncio"] = asyncio.new_event_loop
    return factories


@pytest.fixture
async def reporter() -> AsyncIterator[Callable[[Handler], Awaitable[Reporter]]]:
    """Start a web server whose every path is answered by the given handler."""
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> Reporter:
        app = web.Application()
        box: list[Reporter] = []

        async def counted(request: web.Request) -> web.StreamResponse:
            state = box[0]
            state.requests.append(request)
            state.in_flight += 1
            state.most_in_flight = max(state.most_in_flight, state.in_flight)
            try:
                return await handler(request)
            finally:
                state.in_flight -= 1

        app.router.add_route("*", "/{tail:.*}", counted)
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, LOOPBACK, 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        state = Reporter(base=f"http://{LOOPBACK}:{port}", app=app)
        box.append(state)
        return state

    yield start
    for runner in runners:
        await runner.cleanup()


ConnectionHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[ConnectionHandler], Awaitable[str]]]:
    """Start a bare TCP server running the given handler per connection; returns its base URL."""
    servers: list[asyncio.Server] = []
    tasks: set[asyncio.Task[None]] = set()

    async def start(handler: ConnectionHandler) -> str:
        async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)  # type: ignore[arg-type]
            try:
                await handler(reader, writer)
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(tracked, LOOPBACK, 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return f"http://{LOOPBACK}:{port}"

    yield start
    for server in servers:
        server.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for server in servers:
        await server.wait_closed()


async def read_request_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port that nothing listens on, for the whole test.

    The port stays bound to a socket that never listens, so a connection to it is refused;
    a port bound and closed at once could be taken by another process meanwhile.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        yield port


@pytest.fixture
def resolver() -> LoopbackResolver:
    return LoopbackResolver()


@pytest.fixture
async def client(resolver: LoopbackResolver) -> AsyncIterator[PollClient]:
    """A poll client with a budget of 16 and the chart's 65536-byte limit."""
    poll_client = PollClient(RequestBudget(16), 65536, resolver=resolver)
    yield poll_client
    await poll_client.close()


def seconds(text: str) -> Duration:
    return Duration.parse(text)
