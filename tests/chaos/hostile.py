"""One loopback server that plays many misbehaving capacity reporters at once.

Each home's endpoint is `http://127.0.0.1:PORT/h/<home>`; the poll asks
`/h/<home>/capacity`. Every answer is drawn at random from the ways a reporter goes wrong
(404, a stall past the timeout, garbage, a body over the size limit, a reset connection,
a negative or missing count, a frozen or future stamp), the ways a hostile one breaks
HTTP (a trailer flood after a good chunked report, endless interim `100 Continue`
answers, a header-field flood, a chunk-extension flood, a body dripped a byte at a time,
a body that never ends), or is a good report whose count flaps. The time of every request
is kept per home, to see that polls keep their period.

A bare asyncio server, not a web framework: no framework sends the broken answers. It
reads keep-alive requests (a poll has no body) and writes each answer's bytes itself; a
flood stops when the poll hangs up, or at `FLOOD` bytes.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from ome_routing.core.report import format_rfc3339

BEHAVIOURS = (
    "good",
    "good",
    "good",
    "not-found",
    "stall",
    "garbage",
    "huge",
    "reset",
    "negative",
    "no-count",
    "frozen",
    "future",
    "trailer-flood",
    "interim-flood",
    "header-flood",
    "extension-flood",
    "drip-body",
    "endless-body",
)
FROZEN_AT = datetime(2026, 1, 1, tzinfo=UTC)
#: The most bytes one flood sends: far past every bound of the poll's transport.
FLOOD = 4 << 20
#: What each flood repeats after its start (`_flood`), in writes of about 16 KiB.
FLOODS = {
    "trailer-flood": b"a",
    "interim-flood": b"HTTP/1.1 100 Continue\r\n\r\n",
    "header-flood": b"X-A: 1\r\n",
    "extension-flood": b"e",
    "endless-body": b"4000\r\n" + b" " * 0x4000 + b"\r\n",
}
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def _answer(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


class HostileReporters:
    def __init__(self, seed: int, stall: float) -> None:
        self._rng = random.Random(seed)
        self._stall = stall
        self.requests: dict[str, list[float]] = defaultdict(list)
        self.url = ""
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def endpoint(self, home: str) -> str:
        return f"{self.url}/h/{home}"

    async def start(self) -> HostileReporters:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=1024)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)  # type: ignore[arg-type]
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # stopped: ended quietly (Python 3.11's stream server logs a cancelled one)
        finally:
            self._connections.discard(task)  # type: ignore[arg-type]
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection may carry the next."""
        head = await reader.readuntil(b"\r\n\r\n")
        parts = head.split(b" ", 2)[1].decode("latin-1").split("/")
        if len(parts) != 4 or parts[1] != "h" or parts[3] != "capacity":
            writer.write(_answer("404 Not Found", b"404: Not Found", "text/plain"))
            return True
        self.requests[parts[2]].append(time.monotonic())
        behaviour = self._rng.choice(BEHAVIOURS)
        if behaviour == "reset":
            writer.transport.abort()
            return False
        if behaviour in FLOODS:
            await self._flood(writer, behaviour)
            return False
        if behaviour == "drip-body":
            await self._drip(writer)
            return False
        if behaviour == "stall":
            await asyncio.sleep(self._stall)
        writer.write(self._simple(behaviour))
        await writer.drain()
        return True

    def _simple(self, behaviour: str) -> bytes:
        if behaviour == "not-found":
            return _answer("404 Not Found", b"no such reporter", "text/plain")
        if behaviour == "garbage":
            return _answer("200 OK", b"{servable: many")
        if behaviour == "huge":
            return _answer("200 OK", json.dumps({"pad": "x" * 100_000}).encode())
        return _answer("200 OK", self._report(behaviour))

    def _report(self, behaviour: str) -> bytes:
        now = datetime.now(UTC)
        body: dict[str, object] = {"servable": self._rng.randint(0, 3)}
        stamp = now
        if behaviour == "negative":
            body["servable"] = -1
        elif behaviour == "no-count":
            del body["servable"]
        elif behaviour == "frozen":
            stamp = FROZEN_AT
        elif behaviour == "future":
            stamp = now + timedelta(hours=1)
        body["observedAt"] = format_rfc3339(stamp)
        return json.dumps(body).encode()

    async def _flood(self, writer: asyncio.StreamWriter, behaviour: str) -> None:
        report = self._report("good")
        start = {
            "trailer-flood": CHUNKED + b"%x\r\n%s\r\n0\r\nX-Trailer: " % (len(report), report),
            "interim-flood": b"",
            "header-flood": b"HTTP/1.1 200 OK\r\n",
            "extension-flood": CHUNKED + b"1;ext=",
            "endless-body": CHUNKED,
        }[behaviour]
        piece = FLOODS[behaviour]
        batch = piece * (16384 // len(piece) + 1)
        writer.write(start)
        sent = 0
        while sent < FLOOD and not writer.is_closing():
            writer.write(batch)
            sent += len(batch)
            await writer.drain()

    async def _drip(self, writer: asyncio.StreamWriter) -> None:
        """A good report's answer, its body a byte every 50 ms: longer than any timeout."""
        answer = _answer("200 OK", self._report("good"))
        body_at = answer.index(b"\r\n\r\n") + 4
        writer.write(answer[:body_at])
        deadline = time.monotonic() + self._stall
        for byte in answer[body_at:]:
            if writer.is_closing() or time.monotonic() > deadline:
                return
            writer.write(bytes((byte,)))
            await asyncio.sleep(0.05)
