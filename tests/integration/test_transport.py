"""The poll transport's connections: kept alive and reused, dropped when stale, and bounded.

Raw loopback servers count the connections and requests they see, and answer as
keep-alive HTTP/1.1 servers do (or fail to).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import pytest

from ome_routing import __version__
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.failures import Outcome
from ome_routing.observer.polling import PollClient, PollResult, request_for_url
from ome_routing.observer.pool import Pool
from ome_routing.observer.transport import origin_of

from .conftest import ConnectionHandler, a_report, read_request_head, seconds

pytestmark = pytest.mark.timeout(20)

StartRaw = Callable[[ConnectionHandler], Awaitable[str]]

REPORT = json.dumps(a_report()).encode()
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(REPORT), REPORT)


async def poll(
    client: PollClient, url: str, method: str = "GET", timeout: str = "2s"
) -> PollResult:
    return await client.poll(request_for_url(url, method), seconds(timeout))


class Counting:
    """A keep-alive server that answers `per_connection` requests on each connection."""

    def __init__(self, per_connection: int = 1000, answer: bytes = ANSWER) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self.per_connection = per_connection
        self.answer = answer
        self.closed = asyncio.Event()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            for _ in range(self.per_connection):
                self.requests.append(await read_request_head(reader))
                writer.write(self.answer)
                await writer.drain()
            # one more request may come: it is read, and the connection dropped unanswered
            await reader.read(1)
        except asyncio.IncompleteReadError:
            self.closed.set()


async def test_polls_to_one_origin_reuse_one_kept_alive_connection(
    client: PollClient, raw_server: StartRaw
) -> None:
    server = Counting()
    base = await raw_server(server)
    for _ in range(3):
        assert (await poll(client, base + "/capacity")).outcome is Outcome.OK
    assert server.connections == 1
    assert len(server.requests) == 3


async def test_a_connection_the_server_drops_while_idle_is_retried_on_a_new_one(
    client: PollClient, raw_server: StartRaw
) -> None:
    """The second request finds its connection closed unanswered: a GET goes again."""
    server = Counting(per_connection=1)
    base = await raw_server(server)
    first = await poll(client, base + "/capacity")
    second = await poll(client, base + "/capacity")
    assert (first.outcome, second.outcome) == (Outcome.OK, Outcome.OK)
    assert server.connections >= 2


async def test_a_post_on_a_connection_dropped_unanswered_is_not_sent_again(
    client: PollClient, raw_server: StartRaw
) -> None:
    heads: list[bytes] = []

    async def once_then_drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await read_request_head(reader))
        writer.write(ANSWER)
        await writer.drain()
        heads.append(await read_request_head(reader))
        writer.transport.abort()

    base = await raw_server(once_then_drop)
    assert (await poll(client, base + "/capacity", "POST")).outcome is Outcome.OK
    result = await poll(client, base + "/capacity", "POST")
    assert result.reason == (
        "capacity endpoint unreachable: connection closed before a response arrived"
    )
    assert len(heads) == 2


async def test_an_answer_that_closes_the_connection_is_not_reused(
    client: PollClient, raw_server: StartRaw
) -> None:
    closing = ANSWER.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    server = Counting(per_connection=1, answer=closing)
    base = await raw_server(server)
    for _ in range(2):
        assert (await poll(client, base + "/capacity")).outcome is Outcome.OK
    assert server.connections == 2


async def test_an_idle_connection_is_closed_after_the_keepalive_time(
    raw_server: StartRaw,
) -> None:
    server = Counting()
    base = await raw_server(server)
    async with PollClient(RequestBudget(2), 65536, keepalive_seconds=0.1) as client:
        assert (await poll(client, base + "/capacity")).outcome is Outcome.OK
        await asyncio.wait_for(server.closed.wait(), 5)
        assert (await poll(client, base + "/capacity")).outcome is Outcome.OK
    assert server.connections == 2


async def test_a_body_that_ends_with_the_connection_is_read(
    client: PollClient, raw_server: StartRaw
) -> None:
    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + REPORT)
        await writer.drain()

    base = await raw_server(until_close)
    result = await poll(client, base + "/capacity")
    assert result.outcome is Outcome.OK


async def test_an_interim_answer_is_skipped_for_the_final_one(
    client: PollClient, raw_server: StartRaw
) -> None:
    server = Counting(answer=b"HTTP/1.1 100 Continue\r\n\r\n" + ANSWER)
    base = await raw_server(server)
    result = await poll(client, base + "/capacity")
    assert result.outcome is Outcome.OK


async def test_a_declared_length_over_the_limit_fails_before_the_body_comes(
    client: PollClient, raw_server: StartRaw
) -> None:
    async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n{")
        await writer.drain()
        await asyncio.sleep(30)

    base = await raw_server(huge)
    result = await poll(client, base + "/capacity", timeout="5s")
    assert result.reason == (
        "reading capacity response: response exceeds configured limit of 65536 bytes"
    )


async def test_an_endless_header_fails_on_the_header_byte_limit(
    client: PollClient, raw_server: StartRaw
) -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nX-Filler: ")
        while True:
            writer.write(b"a" * 1000)
            await writer.drain()

    base = await raw_server(endless)
    result = await poll(client, base + "/capacity", timeout="5s")
    assert result.reason == (
        "capacity endpoint unreachable: "
        "net/http: server response headers exceeded 65536 bytes; aborted"
    )


async def test_the_request_is_one_http_1_1_request_with_the_polls_headers(
    client: PollClient, raw_server: StartRaw
) -> None:
    server = Counting()
    base = await raw_server(server)
    await poll(client, base + "/capacity?x=%2F", "POST")
    lines = server.requests[0].decode().split("\r\n")
    assert lines[0] == "POST /capacity?x=%2F HTTP/1.1"
    assert lines[1] == "Host: " + base.removeprefix("http://")
    assert set(lines[2:-2]) == {
        "Accept: application/json",
        "Accept-Encoding: identity",
        f"User-Agent: ome-routing/{__version__}",
        "Content-Length: 0",
    }


async def test_the_requests_of_one_turn_are_written_together_at_its_end() -> None:
    """On loopback a write lands at once: none has landed until the turn ends, then all."""
    loop = asyncio.get_running_loop()
    head = b"GET /capacity HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        origin = origin_of("127.0.0.1", listener.getsockname()[1], False)
        pool = Pool(loop, 4, 5.0, None)
        connections = [await pool.connect(origin) for _ in range(3)]
        peers = [listener.accept()[0] for _ in connections]
        try:
            answers = [connection.send(head, 1024) for connection in connections]
            for peer in peers:
                peer.setblocking(False)
                with pytest.raises(BlockingIOError):
                    peer.recv(1024)
            await asyncio.sleep(0)
            assert [peer.recv(1024) for peer in peers] == [head] * 3
        finally:
            pool.close()
            for answer in answers:
                answer.cancel()
            for peer in peers:
                peer.close()
