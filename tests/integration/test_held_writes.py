"""Requests held for the end of the event loop's turn: every poll still ends, once.

A request is written when the turn ends (`transport.Pool.write`), so a connection may
close, be dropped or fail between a poll's start and its request's write. Whatever
happens to it, each poll must end with an answer or a failure reason, each request must
reach the server at most once per attempt, and nothing may be written on a connection
its poll gave up. Raw loopback servers play the misbehaving side.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from ome_routing.observer.failures import Outcome
from ome_routing.observer.polling import PollClient, PollResult, probe_request, request_for_url
from ome_routing.observer.pool import Pool
from ome_routing.observer.transport import origin_of

from .conftest import a_report, read_request_head, seconds
from .test_transport import StartRaw

pytestmark = pytest.mark.timeout(30)

REPORT = json.dumps(a_report()).encode()
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(REPORT), REPORT)
#: a probe's answer, which a poll would take as a failure
NO_CONTENT = b"HTTP/1.1 204 No Content\r\n\r\n"
#: an answer after which the connection is not kept
CLOSING = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (
    len(REPORT),
    REPORT,
)
#: polls started in one turn of the event loop
AT_ONCE = 16


async def polls_at_once(client: PollClient, url: str, count: int = AT_ONCE) -> list[PollResult]:
    """`count` polls started in the same turn, so that their requests are held together."""
    request = request_for_url(url, "GET")
    timeout = seconds("5s")
    return await asyncio.gather(*(client.poll(request, timeout) for _ in range(count)))


async def test_polls_on_connections_closed_after_every_answer_all_end_answered(
    client: PollClient, raw_server: StartRaw
) -> None:
    """The server closes each connection after one answer, without saying so.

    The next turn's requests are held on connections whose close may not have been
    read yet: each goes again on a fresh connection, and every poll ends with a report.
    """
    requests = 0

    async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await read_request_head(reader)
        requests += 1
        writer.write(ANSWER)
        await writer.drain()

    base = await raw_server(answer_once)
    for _ in range(5):
        results = await polls_at_once(client, base + "/capacity")
        assert [r.outcome for r in results] == [Outcome.OK] * AT_ONCE, results
    # each poll was sent once, or twice when its kept-alive connection had closed
    assert 5 * AT_ONCE <= requests <= 2 * 5 * AT_ONCE


async def test_polls_on_connections_reset_before_the_answer_all_end_with_a_reason(
    client: PollClient, raw_server: StartRaw
) -> None:
    """Every other connection is reset once its request is in: those polls fail, at once."""
    seen = 0

    async def reset_every_other(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        while True:
            await read_request_head(reader)
            seen += 1
            if seen % 2:
                writer.transport.abort()
                return
            writer.write(ANSWER)
            await writer.drain()

    base = await raw_server(reset_every_other)
    for _ in range(3):
        results = await polls_at_once(client, base + "/capacity")
        for result in results:
            assert result.outcome is Outcome.OK or result.reason, result
        assert any(r.outcome is Outcome.OK for r in results)
        # a reset is an answer of its own: no poll waited for its timeout
        assert all(r.latency < 5 for r in results), results


async def test_polls_and_probes_of_one_turn_to_one_origin_each_get_their_own_answer(
    client: PollClient, raw_server: StartRaw
) -> None:
    """Requests held together on shared connections are never crossed: one answer each."""

    async def by_path(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await read_request_head(reader)
            writer.write(ANSWER if b" /capacity " in head else NO_CONTENT)
            await writer.drain()

    base = await raw_server(by_path)
    poll_request = request_for_url(base + "/capacity", "GET")
    probe_get = probe_request(base + "/healthz", "GET")
    probe_head = probe_request(base + "/healthz", "HEAD")
    timeout = seconds("5s")
    for _ in range(3):
        polls = [client.poll(poll_request, timeout) for _ in range(6)]
        probes = [client.probe(r, timeout) for r in (probe_get, probe_head) * 3]
        answers = await asyncio.gather(*polls, *probes)
        assert [a.outcome for a in answers[:6]] == [Outcome.OK] * 6  # type: ignore[union-attr]
        assert [a.status for a in answers[6:]] == [204] * 6  # type: ignore[union-attr]


async def test_a_request_whose_connection_is_dropped_before_the_turn_ends_is_never_written() -> (
    None
):
    """A poll that gives up (its time ran out, it was cancelled) drops its connection: the
    request held for it is not written, and the server sees the connection close empty."""
    loop = asyncio.get_running_loop()
    head = b"GET /capacity HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        origin = origin_of("127.0.0.1", listener.getsockname()[1], False)
        pool = Pool(loop, 4, 5.0, None)
        kept, dropped = await pool.connect(origin), await pool.connect(origin)
        peers = [listener.accept()[0] for _ in range(2)]
        try:
            answers = [kept.send(head, 1024), dropped.send(head, 1024)]
            dropped.abort()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            peers[0].settimeout(5)
            assert peers[0].recv(1024) == head
            peers[1].settimeout(5)
            try:
                received = peers[1].recv(1024)
            except ConnectionResetError:
                received = b""
            assert received == b""
        finally:
            pool.close()
            for answer in answers:
                answer.cancel()
            for peer in peers:
                peer.close()


class FutureWaiter:
    """A `transport.Waiter` that passes what it is given to a future."""

    def __init__(self, future: asyncio.Future[bytes]) -> None:
        self.future = future

    def done(self) -> bool:
        return self.future.done()

    def set_result(self, result: Any, /) -> None:
        self.future.set_result(result)

    def set_exception(self, exception: BaseException, /) -> None:
        self.future.set_exception(exception)


def _received(peer: socket.socket) -> bool:
    """Whether bytes wait on `peer`, without taking them."""
    try:
        peer.setblocking(False)
        return bool(peer.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        peer.setblocking(True)
        peer.settimeout(5)


class Handing:
    """A `transport.Waiter` that, when its answer comes, does `then`."""

    def __init__(self, then: Callable[[], None]) -> None:
        self.then = then
        self.over = False

    def done(self) -> bool:
        return self.over

    def set_result(self, result: Any, /) -> None:
        self.over = True
        self.then()

    def set_exception(self, exception: BaseException, /) -> None:
        self.over = True


async def test_a_probe_cancelled_after_its_answer_leaves_its_connection_to_the_next_poll(
    client: PollClient,
) -> None:
    """The probe's answer puts its connection back in the pool at once; a poll that takes
    it before the probe's task wakes must get its own answer, even if the probe's task
    is cancelled meanwhile (its time ran out, the prober stopped): the probe no longer
    owns the connection, and must not close it under the poll."""
    loop = asyncio.get_running_loop()
    head = b"GET /capacity HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    pool = client.sender.pool
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        origin = origin_of("127.0.0.1", port, False)
        shared = await pool.connect(origin)
        pool.release(shared)  # the probe takes it
        other = await pool.connect(origin)
        shared_peer, other_peer = listener.accept()[0], listener.accept()[0]
        for peer in (shared_peer, other_peer):
            peer.settimeout(5)
        probe = loop.create_task(
            client.probe(probe_request(f"http://127.0.0.1:{port}/healthz", "GET"), seconds("5s"))
        )
        victim: asyncio.Future[bytes] = loop.create_future()

        def cancel_the_probe_and_poll_on_its_connection() -> None:
            probe.cancel()
            taken = pool.take(origin)
            assert taken is shared
            taken.send_to(FutureWaiter(victim), head, 1024)

        try:
            while not probe.done() and not _received(shared_peer):
                await asyncio.sleep(0.01)
            assert b"/healthz" in shared_peer.recv(1024)
            other.send_to(Handing(cancel_the_probe_and_poll_on_its_connection), head, 1024)
            await asyncio.sleep(0)
            assert other_peer.recv(1024) == head
            # both answers land before the loop looks again: the probe's first
            shared_peer.sendall(NO_CONTENT)
            other_peer.sendall(CLOSING)  # so that the pool's one idle connection is the probe's
            with pytest.raises(asyncio.CancelledError):
                await probe
            assert shared_peer.recv(1024) == head  # the poll's request, on the same connection
            shared_peer.sendall(ANSWER)
            assert await asyncio.wait_for(victim, 5) == REPORT
        finally:
            probe.cancel()
            shared_peer.close()
            other_peer.close()
