"""Answers a hostile or broken reporter sends: each costs its own poll, never the memory.

Raw loopback servers answer with a valid start and then a flood (trailers, interim
answers, header fields, chunk extensions) or with a body that trickles or never ends. Each
poll must fail before its timeout with the reason that names the bound it passed, and
the memory the poll path allocated meanwhile (`tracemalloc`'s peak, the test's servers
included) must stay within `BOUND` of what one good poll costs. Probes share the
transport: the same answers fail a probe with the same words.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace

import pytest

from ome_routing.core.durations import Duration
from ome_routing.core.probes import ProbeResult
from ome_routing.observer.failures import Outcome
from ome_routing.observer.polling import PollClient, PollResult, request_for_url

from .conftest import ConnectionHandler, a_report, read_request_head, seconds
from .test_prober import ONCE, probe_once

pytestmark = pytest.mark.timeout(60)

StartRaw = Callable[[ConnectionHandler], Awaitable[str]]

#: The most a hostile answer may make the poll path allocate beyond a good poll: the
#: issue's target per hostile home. Measured: at most 243 KB (the uvloop and asyncio
#: loops' 256 KiB reads included), at most 3.3 KB for the drips.
BOUND = 1 << 20
#: What a flood sends at most: enough to show an unbounded buffer (its cost would be
#: many times `BOUND`), little enough that a transport without bounds survives the test.
FLOOD = 16 << 20

REPORT = json.dumps(a_report()).encode()
GOOD = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(REPORT), REPORT)
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
A_CHUNKED_REPORT = CHUNKED + b"%x\r\n%s\r\n" % (len(REPORT), REPORT)


@dataclass(frozen=True)
class Flood:
    """An answer that starts with `start`, then repeats `piece` until the poll hangs up."""

    start: bytes
    piece: bytes
    reason: str

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(self.start)
        batch = self.piece * (16384 // len(self.piece) + 1)
        sent = 0
        while sent < FLOOD and not writer.is_closing():
            writer.write(batch)
            sent += len(batch)
            await writer.drain()
        await asyncio.sleep(3600)  # held open: the poll must not wait for the end


FLOODS = {
    "trailer flood": Flood(
        A_CHUNKED_REPORT + b"0\r\nX-Trailer: ",
        b"a",
        "reading capacity response: "
        "server response headers and trailers exceeded 65536 bytes; aborted",
    ),
    "long trailer lines": Flood(
        A_CHUNKED_REPORT + b"0\r\n",
        b"X-T: " + b"a" * 8000 + b"\r\n",
        "reading capacity response: "
        "server response headers and trailers exceeded 65536 bytes; aborted",
    ),
    "trailer field flood": Flood(
        A_CHUNKED_REPORT + b"0\r\n",
        b"X-T: 1\r\n",
        "reading capacity response: "
        "server response headers and trailers exceeded 100 fields; aborted",
    ),
    "endless interim answers": Flood(
        b"",
        b"HTTP/1.1 100 Continue\r\n\r\n",
        "capacity endpoint unreachable: net/http: too many 1xx informational responses",
    ),
    "header field flood": Flood(
        b"HTTP/1.1 200 OK\r\n",
        b"X-A: 1\r\n",
        "capacity endpoint unreachable: server response headers exceeded 100 fields; aborted",
    ),
    "endless header": Flood(
        b"HTTP/1.1 200 OK\r\nX-Filler: ",
        b"a",
        "capacity endpoint unreachable: "
        "net/http: server response headers exceeded 65536 bytes; aborted",
    ),
    "chunk extension flood": Flood(
        CHUNKED + b"1;ext=",
        b"e",
        "reading capacity response: chunked encoding contains too much non-data",
    ),
    "chunk extensions on every chunk": Flood(
        CHUNKED,
        b"1;" + b"e" * 1000 + b"\r\n \r\n",
        "reading capacity response: chunked encoding contains too much non-data",
    ),
    "a body that never ends": Flood(
        CHUNKED,
        b"4000\r\n" + b" " * 0x4000 + b"\r\n",
        "reading capacity response: response exceeds configured limit of 65536 bytes",
    ),
    "a body that ends with the connection, never": Flood(
        b"HTTP/1.1 200 OK\r\n\r\n",
        b" ",
        "reading capacity response: response exceeds configured limit of 65536 bytes",
    ),
}


@dataclass(frozen=True)
class Drip:
    """An answer that starts with `start`, then sends `piece` a byte at a time, forever."""

    start: bytes
    piece: bytes
    reason: str
    every: float = 0.002

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(self.start)
        while not writer.is_closing():
            for byte in self.piece:
                writer.write(bytes((byte,)))
                await asyncio.sleep(self.every)


DRIPS = {
    "slow drip body": Drip(
        b"HTTP/1.1 200 OK\r\nContent-Length: 60000\r\n\r\n",
        b" ",
        "capacity request did not complete: timed out after 1s",
    ),
    "slow drip header": Drip(
        b"HTTP/1.1 200 OK\r\nX-Drip: ",
        b"a",
        "capacity endpoint unreachable: timed out after 1s",
    ),
    "slow drip trailer": Drip(
        A_CHUNKED_REPORT + b"0\r\nX-Drip: ",
        b"a",
        "capacity request did not complete: timed out after 1s",
    ),
}


async def traced_poll(client: PollClient, url: str, timeout: str) -> tuple[PollResult, int]:
    """A poll, and the most memory traced above where it started while it ran."""
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    result = await client.poll(request_for_url(url, "GET"), seconds(timeout))
    return result, tracemalloc.get_traced_memory()[1] - before


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield None
    finally:
        tracemalloc.stop()


async def a_good_polls_cost(client: PollClient, raw_server: StartRaw) -> int:
    """What a good poll allocates on a new connection: the idle home's cost."""

    async def good(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(GOOD)
        await writer.drain()
        await asyncio.sleep(3600)

    base = await raw_server(good)
    result, cost = await traced_poll(client, base + "/capacity", "5s")
    assert result.outcome is Outcome.OK
    return cost


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("answer", list(FLOODS.values()), ids=list(FLOODS))
async def test_a_flood_fails_the_poll_at_once_with_its_bound_and_bounded_memory(
    client: PollClient, raw_server: StartRaw, answer: Flood
) -> None:
    """The reason is the bound's, not the 5s timeout's: the poll failed before its timeout."""
    idle = await a_good_polls_cost(client, raw_server)
    base = await raw_server(answer)
    result, cost = await traced_poll(client, base + "/capacity", "5s")
    assert result.reason == answer.reason
    assert cost - idle < BOUND, f"{cost - idle} bytes beyond a good poll's {idle}"


@pytest.mark.usefixtures("traced")
@pytest.mark.parametrize("answer", list(DRIPS.values()), ids=list(DRIPS))
async def test_a_drip_fails_the_poll_at_its_timeout_with_bounded_memory(
    client: PollClient, raw_server: StartRaw, answer: Drip
) -> None:
    idle = await a_good_polls_cost(client, raw_server)
    base = await raw_server(answer)
    result, cost = await traced_poll(client, base + "/capacity", "1s")
    assert result.reason == answer.reason
    assert cost - idle < BOUND, f"{cost - idle} bytes beyond a good poll's {idle}"


async def test_a_header_dripped_in_pieces_is_read_whole(
    client: PollClient, raw_server: StartRaw
) -> None:
    """The held pieces of a split header line reach the parser, in order, at its end."""
    answer = GOOD.replace(b"\r\n\r\n", b"\r\nX-Long: " + b"v" * 3000 + b"\r\n\r\n", 1)

    async def in_pieces(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        for at in range(0, len(answer), 7):
            writer.write(answer[at : at + 7])
            await writer.drain()
            await asyncio.sleep(0)
        await asyncio.sleep(3600)

    base = await raw_server(in_pieces)
    result = await client.poll(request_for_url(base + "/capacity", "GET"), seconds("5s"))
    assert result.outcome is Outcome.OK


async def test_trailers_within_the_bounds_are_accepted(
    client: PollClient, raw_server: StartRaw
) -> None:
    answer = A_CHUNKED_REPORT + b"0\r\n" + b"X-T: 1\r\n" * 50 + b"\r\n"

    async def with_trailers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        for at in range(0, len(answer), 5):
            writer.write(answer[at : at + 5])
            await writer.drain()
            await asyncio.sleep(0)
        await asyncio.sleep(3600)

    base = await raw_server(with_trailers)
    result = await client.poll(request_for_url(base + "/capacity", "GET"), seconds("5s"))
    assert result.outcome is Outcome.OK


async def test_five_interim_answers_are_read_and_the_sixth_is_one_too_many(
    client: PollClient, raw_server: StartRaw
) -> None:
    def answering(interims: int) -> ConnectionHandler:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request_head(reader)
            writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" * interims + GOOD)
            await writer.drain()
            await asyncio.sleep(3600)

        return answer

    five = await raw_server(answering(5))
    six = await raw_server(answering(6))
    request = request_for_url
    assert (await client.poll(request(five + "/capacity", "GET"), seconds("5s"))).outcome is (
        Outcome.OK
    )
    result = await client.poll(request(six + "/capacity", "GET"), seconds("5s"))
    assert result.reason == (
        "capacity endpoint unreachable: net/http: too many 1xx informational responses"
    )


PROBED = {
    name: FLOODS[name]
    for name in (
        "trailer flood",
        "endless interim answers",
        "header field flood",
        "chunk extension flood",
    )
}


@pytest.mark.parametrize("answer", list(PROBED.values()), ids=list(PROBED))
async def test_a_probe_fails_on_the_same_bounds_in_the_probers_words(
    client: PollClient, raw_server: StartRaw, answer: Flood
) -> None:
    base = await raw_server(answer)
    state, _ = await probe_once(client, base, replace(ONCE, timeout=Duration.parse("5s")))
    assert state.result is ProbeResult.FAILING
    family, detail = answer.reason.split(": ", 1)
    words = (
        "response body error: " if family == "reading capacity response" else ("transport error: ")
    )
    assert state.message == words + detail
