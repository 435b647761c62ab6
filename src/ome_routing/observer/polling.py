"""One capacity poll over HTTP: the request, the byte cap, and the failure it maps to.

A poll is one request with the poll's `method` (GET or POST) and no body, to the
entry's `endpoint` followed by the poll's `path`, joined as OME joins them (`urls`:
the canonical endpoint, then Go's `url.JoinPath`), once per home. It sends no credentials (no cookies,
no authorization but the operator's bearer token over HTTPS (`observer.trust`), nothing
from the environment: no proxy, no netrc), follows no
redirects, asks for the body as it is (`Accept-Encoding: identity`) and does not
decompress it, and reads at most `maxResponseBytes` bytes of the body. The request's
bytes are made once per home too, and sent on a kept-alive connection of `transport`
(HTTP/1.1 parsed by llhttp, TLS by `ssl`).

Time: the poll's `timeout` starts when the request is sent, once it holds a slot of the
shared `RequestBudget` (in the turn of its flow, the InferenceService's namespace); the
wait for the slot is measured and never fails the poll. No
status line and headers within the timeout is "unreachable"; running out of time while
reading the body is "did not complete". The timeouts of a client's polls share one
timer (`deadlines`), since a timer of their own for each poll costs more than the rest
of the observer's work on it.

Errors: every failure is a `failures.PollFailure` whose `reason` is the exact
fallback reason; `PollClient.poll` returns it in a `PollResult` instead of raising.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import TracebackType
from typing import Any, NamedTuple

from yarl import URL

from ome_routing import __version__
from ome_routing.core.durations import Duration
from ome_routing.core.quoting import quote
from ome_routing.observer import failures
from ome_routing.observer.budget import DEFAULT_FLOW, RequestBudget
from ome_routing.observer.deadlines import Deadlines
from ome_routing.observer.failures import PollFailure
from ome_routing.observer.flight import Flight, Sender, failed, out_of_time
from ome_routing.observer.flight import PollResult as PollResult  # where it used to be
from ome_routing.observer.pool import Pool
from ome_routing.observer.request import PollRequest
from ome_routing.observer.transport import (
    CLOSED_EARLY,
    Connection,
    Resolver,
    StaleConnection,
    origin_of,
    request_head,
)
from ome_routing.observer.trust import Trust
from ome_routing.observer.urls import GoURL, URLError, canonical_endpoint, join_path, parse_url

METHODS = ("GET", "POST")
PROBE_METHODS = ("GET", "HEAD", "POST")
#: Idle keep-alive connections close after this long. Reuse helps homes that share a
#: host (a shared ingress) and are polled often; homes on distinct hosts polled every
#: `period` seconds would otherwise each hold an idle socket.
DEFAULT_KEEPALIVE_SECONDS = 5.0
#: The headers of every poll. `Accept-Encoding: identity` asks for the body as it is:
#: the observer never decompresses.
_HEADERS = {
    "Accept": "application/json",
    "Accept-Encoding": "identity",
    "User-Agent": f"ome-routing/{__version__}",
}


def _prepared(url: URL, method: str) -> PollRequest:
    host, port = url.host, url.port
    if host is None or port is None:
        raise failures.invalid_target(f"endpoint URL {quote(str(url))} must be absolute")
    head = request_head(method, url.raw_path_qs, url.raw_authority, _HEADERS)
    return PollRequest(str(url), method, origin_of(host, port, url.scheme == "https"), head)


class ProbeAnswer(NamedTuple):
    """How one probe ended: the answer's status, or the failure that stopped it."""

    status: int | None
    failure: PollFailure | None
    #: seconds spent waiting for a budget slot
    waited: float
    #: seconds from sending the request to the end of the reading (0 if never sent)
    latency: float


def _settle(done: asyncio.Future[PollResult], result: PollResult) -> None:
    if not done.done():  # the awaiting task may have been cancelled meanwhile
        done.set_result(result)


def _sendable(text: str) -> URL:
    """The URL as the client sends it, escaped exactly as written.

    Go's parser takes any port number, and its dialer refuses one out of range; the
    client refuses it on building the URL, with the same outcome.
    """
    try:
        url = URL(text, encoded=True)
        url.explicit_port  # noqa: B018 - checks the port, which the URL reads lazily
        return url
    except ValueError as err:
        if "port" in str(err).lower():
            port = text.split("//", 1)[-1].split("/", 1)[0].rpartition(":")[2]
            raise failures.unreachable(f"address {port}: invalid port") from None
        raise failures.unbuildable(f"{quote(text)}: {err}") from None


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise failures.unbuildable(f'method "{method}" is not GET or POST')
    return method


def _without_credentials(endpoint: GoURL) -> GoURL:
    """The poll sends no credentials, so an endpoint that carries some is refused."""
    if endpoint.userinfo is not None:
        shown = replace(endpoint, userinfo=None)
        raise failures.invalid_target(f"endpoint {quote(str(shown))} must not carry credentials")
    return endpoint


def poll_target(endpoint: str) -> str:
    """The endpoint as OME identifies it (`CanonicalEndpoint`), or the invalid-target failure."""
    try:
        canonical = canonical_endpoint(endpoint)
    except URLError as err:
        raise failures.invalid_target(str(err)) from None
    return str(_without_credentials(canonical))


def join_poll_url(endpoint: str, path: str) -> str:
    """The poll URL: `url.JoinPath` of the canonical endpoint and the path, as OME builds it.

    `http://llm.worker-a.example.com/qwen3-0-6b/qwen3-0-6b` and `/capacity` give
    `http://llm.worker-a.example.com/qwen3-0-6b/qwen3-0-6b/capacity`.
    """
    target = poll_target(endpoint)
    try:
        return join_path(target, path)
    except URLError as err:
        raise failures.invalid_url(f"join endpoint and capacity path: {err}") from None


def _request(url: str, method: str) -> PollRequest:
    try:
        parse_url(url)  # as Go's `http.NewRequest` parses the URL again
    except URLError as err:
        raise failures.unbuildable(str(err)) from None
    return _prepared(_sendable(url), _check_method(method))


def probe_request(url: str, method: str) -> PollRequest:
    """The request of a health probe to a joined URL; a probe may also use HEAD."""
    try:
        parse_url(url)
    except URLError as err:
        raise failures.unbuildable(str(err)) from None
    if method not in PROBE_METHODS:
        raise failures.unbuildable(f"method {quote(method)} is not GET, HEAD or POST")
    return _prepared(_sendable(url), method)


def build_request(endpoint: str, path: str, method: str) -> PollRequest:
    """The request for a home's endpoint and its poll's path and method.

    Built once for a home, not for each poll: the URL work is done here.
    """
    return _request(join_poll_url(endpoint, path), method)


def request_for_url(url: str, method: str) -> PollRequest:
    """The request for a full poll URL, sent as written: absolute, http or https."""
    try:
        parsed = parse_url(url)
    except URLError as err:
        raise failures.invalid_target(f"parse endpoint URL: {err}") from None
    if not parsed.scheme or not parsed.host or parsed.opaque:
        raise failures.invalid_target(f"endpoint URL {quote(url)} must be absolute")
    if parsed.scheme not in ("http", "https"):
        raise failures.invalid_target(f"endpoint URL {quote(url)} must use HTTP or HTTPS")
    return _request(str(_without_credentials(parsed)), method)


class PollClient:
    """Sends polls over kept-alive connections, within a shared request budget.

    Make it inside a running event loop; close it with `await client.close()` (or use it
    as an async context manager). `resolver` resolves host names (the event loop's
    `getaddrinfo` by default; any aiohttp resolver fits). `trust` is the operator's
    transport settings (`observer.trust`; None: OME's client, the system's CA store).
    """

    def __init__(
        self,
        budget: RequestBudget,
        max_response_bytes: int,
        *,
        resolver: Resolver | None = None,
        keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
        trust: Trust | None = None,
    ) -> None:
        if max_response_bytes < 1:
            raise ValueError(f"maxResponseBytes must be positive, got {max_response_bytes}")
        self._budget = budget
        self._limit = max_response_bytes
        self._closing = False
        self._loop = asyncio.get_running_loop()
        self._pool = Pool(self._loop, budget.limit, keepalive_seconds, resolver, trust)
        self._deadlines = Deadlines(self._loop)
        self._sender = Sender(self._loop, self._pool, self._deadlines, budget, max_response_bytes)

    @property
    def budget(self) -> RequestBudget:
        return self._budget

    @property
    def max_response_bytes(self) -> int:
        return self._limit

    async def close(self) -> None:
        """Close every connection; polls after this fail as not submitted."""
        self._closing = True
        self._sender.closing = True
        self._pool.close()
        self._deadlines.close()

    async def __aenter__(self) -> PollClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def poll(
        self, request: PollRequest, timeout: Duration, flow: str = DEFAULT_FLOW
    ) -> PollResult:
        """Send one poll once a budget slot is free (in `flow`'s turn), and read its answer."""
        if self._closing:
            return failed(failures.not_submitted("observer is stopping"), 0.0, 0.0)
        budget = self._budget
        waited = 0.0 if budget.try_acquire(flow) else await budget.acquire(flow)
        done: asyncio.Future[PollResult] = self._loop.create_future()
        flight = Flight(
            self._sender, request, timeout, lambda result: _settle(done, result), waited, flow
        )
        flight.launch()
        try:
            return await done
        except asyncio.CancelledError:
            flight.cancel()
            raise

    @property
    def sender(self) -> Sender:
        """What a poll sent as callbacks (`flight.Flight`) needs of this client.

        The caller holds a budget slot for each `Flight` it launches; the flight gives
        it back when it ends.
        """
        return self._sender

    def connecting(self) -> set[asyncio.Task[None]]:
        """The tasks that open connections for polls now (a cancelled one may linger)."""
        return self._sender.tasks

    async def probe(
        self,
        request: PollRequest,
        timeout: Duration,
        task: asyncio.Task[Any] | None = None,
        flow: str = DEFAULT_FLOW,
    ) -> ProbeAnswer:
        """Send one health probe once a budget slot is free (in `flow`'s turn); the status decides.

        The same slots, connections, limits and timeout as a poll; at most
        `maxResponseBytes` of the body are read and discarded, and a longer body is
        not a failure. Failures carry the poll families' reasons; the prober words them.
        """
        if self._closing:
            return ProbeAnswer(None, failures.not_submitted("observer is stopping"), 0.0, 0.0)
        budget = self._budget
        waited = 0.0 if budget.try_acquire(flow) else await budget.acquire(flow)
        loop = self._loop
        start: float | None = None
        head_only = request.method == "HEAD"
        try:
            if self._closing:
                raise failures.not_submitted("observer is stopping")
            start = loop.time()
            limit = self._deadlines.arm(start + timeout.seconds, task)
            connection: Connection | None = None
            answer: asyncio.Future[int] | None = None
            timed_out = False
            try:
                try:
                    connection = self._pool.take(request.origin)
                    if connection is None:
                        connection = await self._pool.connect(request.origin)
                    try:
                        answer = connection.send_probe(
                            request.head, self._limit, head_only=head_only
                        )
                        status = await answer
                    except StaleConnection:
                        if request.method != "GET":
                            raise failures.unreachable(CLOSED_EARLY) from None
                        connection = await self._pool.connect(request.origin)
                        answer = connection.send_probe(
                            request.head, self._limit, head_only=head_only
                        )
                        status = await answer
                finally:
                    timed_out = self._deadlines.disarm(limit)
            except asyncio.CancelledError:
                # once its answer came, the connection is no longer the probe's: it went
                # back to the pool, where another request may have taken it already
                if connection is not None and (answer is None or not answer.done()):
                    connection.abort()
                if not timed_out:
                    raise
                answered = connection is not None and connection.answered
                raise out_of_time(answered, timeout) from None
            except StaleConnection:
                raise failures.unreachable(CLOSED_EARLY) from None
        except PollFailure as failure:
            spent = 0.0 if start is None else loop.time() - start
            return ProbeAnswer(None, failure, waited, spent)
        finally:
            budget.release(flow)
        return ProbeAnswer(status, None, waited, loop.time() - start)
