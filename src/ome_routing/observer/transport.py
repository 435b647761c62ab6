"""The poll's HTTP/1.1 transport: keep-alive connections, parsed by llhttp (`httptools`).

A poll is one request shape only: GET or POST without a body, the same few headers, an
answer read whole up to a byte cap. A general HTTP client spends most of a poll's CPU on
what polls never use (request building, header objects, streams, hooks); here the
request's bytes are made once per home (`request_head`), and each answer goes straight
from the socket into the parser's callbacks on one `asyncio.Protocol`.

What it keeps of a client's duties:

- Parsing is llhttp's, through `httptools`; this module only keeps count. Every byte
  of an answer is counted as it arrives: the body against the poll's
  `maxResponseBytes` (a declared `Content-Length` above it fails at once; a chunked or
  endless body fails one byte past it), and every other byte (status lines and headers,
  the interim answers' included, chunk-size lines with their extensions, trailers)
  against the one `HEAD_LIMIT`. An answer carries at most `FIELD_LIMIT` header fields,
  trailers and interim answers' included, and at most `INTERIM_LIMIT` interim (1xx)
  answers come before the final one. A breach fails the poll at once, names what was
  exceeded, and drops the connection with what it held. Bodies are never decompressed.
- llhttp hands a header line over in the pieces the reads cut it into, and `httptools`
  joins them by copying; a line that trickles in byte by byte would be copied whole at
  every byte. So once a read ends inside a header or trailer line, the next bytes wait
  here (`_held`) until the line's end arrives, and go to the parser together.
- TLS is the standard `ssl` module's: the default context (certificates verified, the
  name checked), or the operator's (`observer.trust`: a CA bundle, a client certificate);
  names are resolved by the given resolver, or by the event loop's `getaddrinfo`, and
  the operator's allow and deny lists judge each resolved address before it is connected
  to. No proxy, no cookies, no redirects, and no credentials but the operator's bearer
  token over HTTPS.
- Requests are written at the end of the event loop's turn, all those of the turn one
  after the other (`pool.Pool.write`), not each as its poll starts: on loopback, a write to a
  server that sleeps wakes it, which costs the writer more than the rest of the write;
  back to back, the first wakes it and it reads the rest before sleeping again.
- Connections are kept alive per origin and reused, most recent first, for at most the
  keep-alive time. A reused connection that closes before any byte of the answer came
  (the server dropped it while idle) is retried once on a fresh one for a GET, as Go's
  transport retries a request it may replay.

`observer.pool.Pool` keeps the idle connections and opens new ones; a connection knows it
only as its `Keeper`.

Failures are `failures.PollFailure`s with the fallback reasons of the aiohttp client it
replaces: before the status line and headers they are "unreachable", after them
"reading capacity response".
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from ipaddress import ip_address
from typing import Any, NamedTuple, Protocol, cast

import httptools

from ome_routing.observer import failures
from ome_routing.observer.failures import PollFailure

#: The most bytes of an answer that are not its body: status lines and headers (the
#: interim answers' too, as Go's client counts them since golang/go#65035), chunk-size
#: lines with their extensions, and trailers. Go reads trailers without a byte limit and
#: chunk extensions up to a ratio to the data (`chunked encoding contains too much
#: non-data`); one count bounds them all: a report's framing is a few hundred bytes.
HEAD_LIMIT = 65536
#: The most header fields of an answer, trailers and interim answers' included: Envoy's
#: default (`max_headers_count`), which real servers stay far below; Go has no such
#: bound, and its byte limit alone lets 16,000 empty fields through.
FIELD_LIMIT = 100
#: The most interim (1xx) answers before the final one: Go's client's bound (until
#: golang/go#65035 replaced it by counting their bytes, which `HEAD_LIMIT` does too).
INTERIM_LIMIT = 5

CLOSED_EARLY = "connection closed before a response arrived"
# Go's net/http texts for the bounds Go has (its `Transport`'s header limit, its bound on
# 1xx answers, its chunked reader's bound on what is not data); ours, in Go's words, for
# those it has not (documented in docs/capacity-polling.md)
HEADERS_TOO_LARGE = "net/http: server response headers exceeded %d bytes; aborted"
TOO_MANY_INTERIM = "net/http: too many 1xx informational responses"
TOO_MUCH_NON_DATA = "chunked encoding contains too much non-data"
TRAILERS_TOO_LARGE = "server response headers and trailers exceeded %d bytes; aborted"
TOO_MANY_FIELDS = "server response headers exceeded %d fields; aborted"
TOO_MANY_TRAILER_FIELDS = "server response headers and trailers exceeded %d fields; aborted"
_CUT_SHORT = "connection closed before the body was complete"
_MALFORMED = "malformed HTTP response"


class Resolver(Protocol):
    """Resolves a host name; aiohttp's resolvers (`aiohttp.abc.AbstractResolver`) are ones."""

    async def resolve(self, host: str, port: int, family: socket.AddressFamily) -> Any: ...


class Origin(NamedTuple):
    """Where a request's connection goes: the URL's host and port, and whether TLS.

    A named tuple: the pool looks its connections up by origin twice a poll, and a
    tuple's hash and equality are the cheapest.
    """

    host: str
    port: int
    tls: bool
    #: whether `host` is an IP address, which is never resolved
    literal: bool


def origin_of(host: str, port: int, tls: bool) -> Origin:
    try:
        ip_address(host)
        literal = True
    except ValueError:
        literal = False
    return Origin(host, port, tls, literal)


def request_head(method: str, target: str, authority: str, headers: dict[str, str]) -> bytes:
    """The request's bytes: a request line, `Host`, the headers; POST says it has no body."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    if method == "POST":
        lines.append("Content-Length: 0")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Waiter(Protocol):
    """Who waits for an answer: an `asyncio.Future`, or an object that takes it at once.

    A poll's own object (`flight.Flight`) takes the answer in the protocol's callback,
    without a future and the event-loop turn that waking a coroutine costs.
    """

    def done(self) -> bool: ...

    def set_result(self, result: Any, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class Keeper(Protocol):
    """What a connection needs of the pool that keeps it (`pool.Pool`)."""

    loop: asyncio.AbstractEventLoop

    def write(self, connection: Connection, head: bytes) -> None:
        """Write a request on `connection` at the end of this turn of the event loop."""

    def release(self, connection: Connection) -> None:
        """Keep a connection whose answer was read whole for the next request."""

    def forget(self, connection: Connection) -> None:
        """A connection that is closing: never hand it out again."""


class StaleConnection(Exception):
    """A reused connection closed before any byte of the answer: the request may go again."""


class Connection(asyncio.Protocol):
    """One keep-alive connection; `send` writes a request and waits for its whole answer."""

    __slots__ = (
        "_chunk_open",
        "_chunks",
        "_cut",
        "_declared",
        "_done",
        "_failure",
        "_fields",
        "_head_only",
        "_held",
        "_holding",
        "_informational",
        "_interims",
        "_keep_alive",
        "_limit",
        "_parser",
        "_pool",
        "_probe",
        "_received",
        "_size",
        "_status",
        "_transport",
        "_waiter",
        "answered",
        "idle_since",
        "origin",
        "reused",
    )
    # `connection_lost` deletes the parser: compiled (`devcluster.compiled`), only the
    # attributes named here may be deleted
    __deletable__ = ("_parser",)

    def __init__(self, pool: Keeper, origin: Origin) -> None:
        self._pool = pool
        self.origin = origin
        self._transport: asyncio.Transport | None = None
        # the parser comes with the connection and goes with it (`connection_made`,
        # `connection_lost`): it holds this protocol for its callbacks, and the two would
        # make a cycle that only the collector's rare full collection frees; a connection
        # that never connects never makes one
        self._parser: httptools.HttpResponseParser
        self._waiter: Waiter | None = None
        self._chunks: list[bytes] = []
        self._limit = 0
        self._size = 0  # body bytes of the answer
        self._received = 0  # every byte of the answer so far
        self._fields = 0  # header and trailer fields of the answer
        self._interims = 0  # interim answers before it
        # bytes of a header line split across reads, held until its end comes
        self._held = bytearray()
        self._holding = False
        # a chunk-size line came, and no data since: after the last one, trailers follow
        self._chunk_open = False
        self._declared = False  # a Content-Length or Transfer-Encoding header came
        self._informational = False  # the answer being read is a 1xx one: skipped
        self._done = False
        self._keep_alive = False
        self._failure: PollFailure | None = None
        # a probe's answer: its status decides, its body is read up to the limit and
        # discarded, and a longer body only stops the reading (`_cut`)
        self._probe = False
        self._head_only = False
        self._cut = False
        self._status = 0
        #: the status line and headers of the current answer are in
        self.answered = False
        #: the connection served a request before the current one
        self.reused = False
        self.idle_since = 0.0

    # --- the request -------------------------------------------------------------

    def send(self, head: bytes, limit: int) -> asyncio.Future[bytes]:
        """Write a request; the future is the answer's body, or a `PollFailure`."""
        return self._send(head, limit, probe=False, head_only=False)

    def send_probe(self, head: bytes, limit: int, *, head_only: bool) -> asyncio.Future[int]:
        """Write a probe; the future is the answer's status, or a `PollFailure`.

        Any status is an answer; at most `limit` bytes of the body are read, and
        discarded; a longer body ends the reading (and the connection) without failing.
        `head_only` (a HEAD request) ends it with the headers.
        """
        return self._send(head, limit, probe=True, head_only=head_only)

    def send_to(self, waiter: Waiter, head: bytes, limit: int) -> None:
        """Write a request; `waiter` is given the answer's body, or a `PollFailure`.

        It may be given a failure before this returns (a connection already closing).
        """
        transport = self._transport
        if transport is None or transport.is_closing():
            waiter.set_exception(
                StaleConnection() if self.reused else failures.unreachable(CLOSED_EARLY)
            )
            return
        self._waiter = waiter
        self._limit = limit
        self._chunks.clear()
        self._size = self._received = self._fields = self._interims = 0
        self._declared = self._done = self._keep_alive = self.answered = False
        self._holding = self._chunk_open = False
        self._failure = None
        self._probe = self._head_only = self._cut = False
        self._status = 0
        self._pool.write(self, head)

    def _send(
        self, head: bytes, limit: int, *, probe: bool, head_only: bool
    ) -> asyncio.Future[Any]:
        waiter: asyncio.Future[Any] = self._pool.loop.create_future()
        self.send_to(waiter, head, limit)
        # the request is written at the end of the turn: its kind may be set until then
        self._probe, self._head_only = probe, head_only
        return waiter

    def flush(self, head: bytes) -> None:
        """Write a request that `Pool.write` held, unless the connection closed meanwhile.

        Nothing is lost by not writing: a connection that is closing calls
        `connection_lost`, which tells the waiter (a failure, or a stale connection to
        try again), and one its poll dropped (`abort`) has no waiter left to tell.
        """
        transport = self._transport
        if transport is not None and self._waiter is not None and not transport.is_closing():
            transport.write(head)

    def abort(self) -> None:
        """Drop the connection at once (a poll that timed out or was cancelled)."""
        self._waiter = None
        if self._transport is not None:
            self._transport.abort()

    # --- asyncio.Protocol --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self._parser = httptools.HttpResponseParser(self)

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self._drop()  # bytes nobody asked for: the connection is not usable
            return
        self._received += len(data)
        if self._holding:
            held = self._held
            held += data
            if b"\n" not in data:  # the line goes on: nothing for the parser yet
                if self._received - self._size > HEAD_LIMIT:
                    self._fail(self._over_limit(data))
                return
            data = bytes(held)
            held.clear()
            self._holding = False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(failures.unreachable(_MALFORMED))
            return
        except httptools.HttpParserError as err:
            # a callback that found a bound exceeded raised its failure, which stopped llhttp
            breach = err.__context__
            if isinstance(breach, PollFailure):
                self._fail(breach)
            else:
                self._fail(failures.reading_failed(_CUT_SHORT) if self.answered else _malformed())
            return
        if self._failure is not None:
            self._fail(self._failure)
        elif self._done:
            self._waiter = None
            # what `send` resolves to: the body, or a probe's status
            answer = self._status if self._probe else b"".join(self._chunks)
            self._chunks.clear()  # the list stays, for the next answer
            # back in the pool before the waiter hears: one that takes the answer at
            # once may send its next request on this connection
            if self._keep_alive:
                self._pool.release(self)
            else:
                self._drop()
            waiter.set_result(answer)
        elif self._received - self._size > HEAD_LIMIT:
            self._fail(self._over_limit(data))
        elif data[-1] != 10 and (not self.answered or self._chunk_open):
            self._holding = True  # the read ended inside a header or trailer line (10: "\n")

    def eof_received(self) -> bool:
        return False  # close the connection: connection_lost finishes the answer

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self._lost(exc)
        finally:
            with contextlib.suppress(AttributeError):
                del self._parser  # the cycle with its callbacks, broken

    def _lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._pool.forget(self)
        waiter = self._waiter
        self._waiter = None
        if waiter is None or waiter.done():
            return
        if self.answered:
            if exc is None and not self._declared and not self._informational:
                # a body without a declared length ends with the connection
                waiter.set_result(self._status if self._probe else b"".join(self._chunks))
            else:
                waiter.set_exception(failures.reading_failed(_CUT_SHORT))
        elif self.reused and self._received == 0:
            waiter.set_exception(StaleConnection())
        elif isinstance(exc, OSError) and exc.errno is not None:
            waiter.set_exception(failures.unreachable(failures.os_error_text(exc)))
        else:
            waiter.set_exception(failures.unreachable(CLOSED_EARLY))

    # --- llhttp's callbacks ------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        if self._fields > FIELD_LIMIT:
            raise self._too_many_fields()
        size = len(name)  # once: most headers are neither
        if size == 14 and name.lower() == b"content-length":
            self._declared = True
            if not self._probe and value.strip().isdigit() and int(value) > self._limit:
                self._failure = failures.too_large(self._limit)
        elif size == 17 and name.lower() == b"transfer-encoding":
            self._declared = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._interims += 1
            if self._interims > INTERIM_LIMIT:
                raise failures.unreachable(TOO_MANY_INTERIM)
            self._informational = True  # an interim answer: the real one follows
            self._declared = False
            self._failure = None
            return
        self.answered = True
        self._status = status
        if self._probe:
            if self._head_only:  # no body follows; llhttp does not know it was a HEAD
                self._cut = self._done = True
        elif status != 200:
            self._failure = failures.http_status(status)

    def on_chunk_header(self) -> None:
        self._chunk_open = True

    def on_chunk_complete(self) -> None:
        self._chunk_open = False

    def on_body(self, body: bytes) -> None:
        self._chunk_open = False
        if self._failure is not None or self._cut:
            return
        self._size += len(body)
        if self._probe:
            if self._size > self._limit:
                self._cut = self._done = True  # enough read: the status decides
            return
        if self._size > self._limit:
            self._failure = failures.too_large(self._limit)
        else:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
        elif not self._cut:
            self._done = True
            # read here: llhttp forgets it once the message is over
            self._keep_alive = self._parser.should_keep_alive()

    # --- ending ------------------------------------------------------------------

    def _over_limit(self, data: bytes) -> PollFailure:
        """The failure of an answer whose bytes other than its body passed `HEAD_LIMIT`.

        `data` is the last read. After a chunk-size line with no data since, trailers
        follow if it was the last chunk's; a read that ends inside a line is then in the
        trailers, and one that ends with a line ended a trailer if that line is a field.
        """
        if not self.answered:
            return failures.unreachable(HEADERS_TOO_LARGE % HEAD_LIMIT)
        if self._chunk_open and (
            data[-1] != 10 or b":" in data[data.rfind(b"\n", 0, len(data) - 1) + 1 :]
        ):
            return failures.reading_failed(TRAILERS_TOO_LARGE % HEAD_LIMIT)
        return failures.reading_failed(TOO_MUCH_NON_DATA)

    def _too_many_fields(self) -> PollFailure:
        if not self.answered:
            return failures.unreachable(TOO_MANY_FIELDS % FIELD_LIMIT)
        return failures.reading_failed(TOO_MANY_TRAILER_FIELDS % FIELD_LIMIT)

    def _fail(self, failure: PollFailure) -> None:
        waiter = self._waiter
        self._waiter = None
        # what the answer held goes with it (the parser's partial header with the connection)
        self._chunks.clear()
        self._held = bytearray()
        self._holding = False
        self._drop()
        if waiter is not None and not waiter.done():
            waiter.set_exception(failure)

    def _drop(self) -> None:
        self._pool.forget(self)
        if self._transport is not None:
            self._transport.abort()


def _malformed() -> PollFailure:
    return failures.unreachable(_MALFORMED)
