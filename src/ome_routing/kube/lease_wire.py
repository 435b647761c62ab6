"""A sharded replica's Lease renewals on the event loop's own transport.

A sharded replica renews its member Lease and every shard Lease it holds each retry
period. Through lightkube's client a renewal costs about six times what it costs on a
plain `asyncio.Protocol` (`bench/lease_requests`): almost all of it is the general HTTP
client's Python (request and response objects, auth flows, the connection pool's
locks), not the wire. `LeaseWire` sends just that request, a `replace` of a Lease
(`PUT` with the resourceVersion it read), as lightkube's `replace` would send it (the
same path, body, `fieldManager`, TLS and credentials), and reads the answer with llhttp
(`httptools`).

It is built from the lightkube client the replica already has (`LeaseWire.of`), and only
where it can reach the API server exactly as that client does:

- the server's URL (`https://` or `http://`, with any path prefix), its CA (file or
  data, or the system's), `insecure-skip-tls-verify`, and a client certificate: the
  TLS context is the one lightkube builds for the same kubeconfig;
- a bearer token (`token`), or a token file (`tokenFile`, the in-cluster service
  account's): read once, and read again and the request sent again once on a 401, as
  lightkube's client does when the kubelet has rotated it.

A user that signs in otherwise (an `exec` plugin, a username and password; lightkube
refuses an `auth-provider` itself), or a proxy in front of the server (the `HTTPS_PROXY`
family, which lightkube's client follows), leaves the renewals on lightkube's client:
`LeaseWire.of` returns None and the reason, which the caller logs once. Every other
request of the replica stays on the client anyway: its lists, the watch, creates, the
acquisitions and the releases at shutdown.

What it keeps of a client's duties: keep-alive connections (at most `MAX_IDLE` idle,
the newest reused first); an answer read whole, at most `ANSWER_LIMIT` bytes with its
headers (a longer one fails the request and drops the connection); a reused connection
that closes before any byte of the answer is tried once more on a fresh one (the write
carries its resourceVersion, so a write that did land answers 409 the second time: a
lost tenure, never a second writer); a request that is cancelled (its caller's
deadline) drops its connection. Its own bound is `REQUEST_TIMEOUT`.

Errors: an answer other than 200 raises lightkube's `ApiError`, with the API server's
`Status` when the body is one (a 409 is a conflict, as from lightkube's `replace`);
a connection that fails or closes early, or a breached bound, raises `WireError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path
from typing import cast
from urllib.parse import quote, urlsplit

import httptools
import msgspec
from lightkube import AsyncClient
from lightkube.resources.coordination_v1 import Lease

from ome_routing.kube import lightkube_adapter

#: the most bytes of an answer, status line and headers included: a Lease or a Status is
#: a few hundred bytes; the API server's own answer is not a tenant's, but still bounded
ANSWER_LIMIT = 1 << 20
#: idle keep-alive connections kept: `sharding.CONCURRENT_REQUESTS`, the most renewals
#: that are in flight at once
MAX_IDLE = 8
#: the longest a request may take when its caller sets no shorter deadline: lightkube's
#: default timeout
REQUEST_TIMEOUT = 10.0

_SIGN_INS = (
    ("exec", "an exec plugin"),
    ("username", "a username and password"),
)


class WireError(Exception):
    """A request that got no whole answer: the connection failed, closed, or broke a bound."""


class _Stale(WireError):
    """A reused connection closed before any byte of its answer: the request may go again."""


class _Answer(asyncio.Protocol):
    """One keep-alive connection to the API server; one request on it at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        # made with the connection and dropped with it: it holds this protocol for its
        # callbacks, a cycle that only the collector's rare full collection would free
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._chunks: list[bytes] = []
        self._received = 0
        self._status = 0
        self.reused = False
        self.keep_alive = False

    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Write a request; the future is the answer's status and body, or a `WireError`."""
        waiter = self._loop.create_future()
        transport = self.transport
        if transport is None or transport.is_closing():
            waiter.set_exception(_Stale("connection closed") if self.reused else WireError())
            return waiter
        self._waiter = waiter
        self._chunks = []
        self._received = self._status = 0
        self.keep_alive = False
        transport.write(request)
        return waiter

    def abort(self) -> None:
        self._waiter = None
        if self.transport is not None:
            self.transport.abort()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self._parser = httptools.HttpResponseParser(self)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if self._waiter is None or parser is None:  # nothing asked: not an answer of ours
            self.abort()
            return
        self._received += len(data)
        if self._received > ANSWER_LIMIT:
            self._fail(WireError(f"answer larger than {ANSWER_LIMIT} bytes"))
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as err:
            self._fail(WireError(f"malformed answer: {err}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._parser = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            if self.reused and self._received == 0:
                waiter.set_exception(_Stale("connection closed"))
            else:
                reason = str(exc) if exc is not None else "connection closed"
                waiter.set_exception(WireError(f"before a whole answer: {reason}"))

    # httptools' callbacks

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self._status < 200:  # an interim answer: the real one follows
            self._chunks = []
            return
        assert self._parser is not None
        self.keep_alive = self._parser.should_keep_alive()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self._status, b"".join(self._chunks)))

    def _fail(self, err: WireError) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)
        if self.transport is not None:
            self.transport.abort()


class LeaseWire:
    """`replace` of a Lease, sent on connections of its own; see the module docstring."""

    def __init__(
        self,
        server: str,
        *,
        tls: ssl.SSLContext | None,
        token: str | None = None,
        token_file: str | None = None,
        field_manager: str | None = None,
    ) -> None:
        url = urlsplit(server)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise ValueError(f"server {server!r} is not an http(s) URL")
        self._host = url.hostname
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._tls = tls if url.scheme == "https" else None
        authority = f"[{self._host}]" if ":" in self._host else self._host
        self._authority = f"{authority}:{self._port}"
        self._prefix = url.path.rstrip("/")
        self._query = "" if field_manager is None else "?fieldManager=" + quote(field_manager)
        self._token = token
        self._token_file = token_file
        self._idle: list[_Answer] = []
        self._open: set[_Answer] = set()

    @classmethod
    def of(cls, client: AsyncClient) -> tuple[LeaseWire | None, str]:
        """The wire of lightkube's `client`, or None and why its writes stay on `client`."""
        config = client.config
        user = config.user
        for field, what in _SIGN_INS:
            if getattr(user, field, None):
                return None, f"the kubeconfig's user signs in with {what}"
        server = config.cluster.server
        if lightkube_adapter.proxied(client, server):
            return None, f"a proxy is set for {server}"
        try:
            wire = cls(
                server,
                tls=lightkube_adapter.tls_context(config) if server.startswith("https") else None,
                token=user.token if user is not None else None,
                token_file=user.token_file if user is not None else None,
                field_manager=lightkube_adapter.field_manager(client),
            )
        except (ValueError, OSError, ssl.SSLError) as err:
            return None, str(err)
        return wire, ""

    async def replace(self, lease: Lease) -> Lease:
        """Write `lease` (its resourceVersion a precondition) and return it as written."""
        metadata = lease.metadata
        assert metadata is not None and metadata.name and metadata.namespace
        path = (
            f"{self._prefix}/apis/coordination.k8s.io/v1/namespaces/{quote(metadata.namespace)}"
            f"/leases/{quote(metadata.name)}{self._query}"
        )
        body = msgspec.json.encode(lease.to_dict())
        async with asyncio.timeout(REQUEST_TIMEOUT):
            status, answer = await self._put(path, body, self._bearer(fresh=False))
            if status == 401 and self._token_file is not None:  # the token may have rotated
                status, answer = await self._put(path, body, self._bearer(fresh=True))
        if status != 200:
            raise lightkube_adapter.api_error(status, answer)
        return cast(Lease, Lease.from_dict(msgspec.json.decode(answer)))

    def close(self) -> None:
        """Close every connection, idle or in use."""
        for connection in list(self._open):
            connection.abort()
        self._open.clear()
        self._idle.clear()

    def _bearer(self, *, fresh: bool) -> str | None:
        if self._token_file is not None and (fresh or self._token is None):
            self._token = Path(self._token_file).read_text().strip()
        return self._token

    async def _put(self, path: str, body: bytes, token: str | None) -> tuple[int, bytes]:
        head = (
            f"PUT {path} HTTP/1.1\r\nHost: {self._authority}\r\n"
            "Accept: application/json\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        )
        if token:
            head += f"Authorization: Bearer {token}\r\n"
        request = (head + "\r\n").encode("latin-1") + body
        for _ in range(2):
            connection = self._idle.pop() if self._idle else await self._connect()
            try:
                status, answer = await connection.send(request)
            except _Stale:
                self._forget(connection)
                continue
            except BaseException:  # failed, or cancelled: the connection goes with it
                self._forget(connection)
                raise
            if connection.keep_alive and len(self._idle) < MAX_IDLE:
                connection.reused = True
                self._idle.append(connection)
            else:
                self._forget(connection)
            return status, answer
        raise WireError("connection closed before a response arrived")

    async def _connect(self) -> _Answer:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: _Answer(loop),
                self._host,
                self._port,
                ssl=self._tls,
                server_hostname=self._host if self._tls is not None else None,
            )
        except (OSError, ssl.CertificateError) as err:
            raise WireError(f"connecting to {self._authority}: {err}") from err
        self._open.add(connection)
        return connection

    def _forget(self, connection: _Answer) -> None:
        connection.abort()
        self._open.discard(connection)
        with contextlib.suppress(ValueError):
            self._idle.remove(connection)
