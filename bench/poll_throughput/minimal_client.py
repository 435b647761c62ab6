"""The floor of a Python poll: `asyncio.Protocol` + `httptools`, keep-alive GETs in a loop.

`concurrency` connections each send a GET, wait for the whole answer and send the
next, reading nothing but the body: no budget, no timeout, no report parsing, no
window. What any poll transport in Python costs at least, to compare the observer with.
"""

from __future__ import annotations

import asyncio
import time
from typing import cast
from urllib.parse import urlsplit

import httptools


class _Looping(asyncio.Protocol):
    def __init__(self, request: bytes, stop_at: float, done: asyncio.Future[int]) -> None:
        self.request = request
        self.stop_at = stop_at
        self.done = done
        self.count = 0
        self.chunks: list[bytes] = []
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        b"".join(self.chunks)
        self.chunks = []
        self.count += 1
        assert self.transport is not None
        if time.monotonic() < self.stop_at:
            self.transport.write(self.request)
        else:
            self.transport.close()
            if not self.done.done():
                self.done.set_result(self.count)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(self.count)


async def minimal_loop(url: str, concurrency: int, seconds: float) -> tuple[float, float]:
    """Requests/s and CPU seconds per 1,000 requests."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = (
        f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Accept-Encoding: identity\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    cpu0, t0 = time.process_time(), time.monotonic()
    stop_at = t0 + seconds
    waiters: list[asyncio.Future[int]] = []
    for _ in range(concurrency):
        done: asyncio.Future[int] = loop.create_future()
        waiters.append(done)
        await loop.create_connection(
            lambda done=done: _Looping(request, stop_at, done),  # type: ignore[misc]
            host,
            port,
        )
    count = sum(await asyncio.gather(*waiters))
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    return count / wall, cpu / count * 1000
