"""One capacity poll over HTTP: the request, the byte cap, and the failure it maps to.

A poll is one request with the poll's `method` (GET or POST) and no body, to the
entry's `endpoint` followed by the poll's `path`. It sends no credentials (no cookies,
no authorization, nothing from the environment: no proxy, no netrc), follows no
redirects, asks for the body as it is (`Accept-Encoding: identity`) and does not
decompress it, and reads at most `maxResponseBytes` bytes of the body.

Time: the poll's `timeout` starts when the request is sent, once it holds a slot of the
shared `RequestBudget`; the wait for the slot is measured and never fails the poll. No
status line and headers within the timeout is "unreachable"; running out of time while
reading the body is "did not complete". The timeouts of a client's polls share one
timer (`deadlines`), since a timer of their own for each poll costs more than the rest
of the observer's work on it.

Errors: every failure is a `failures.PollFailure` whose `reason` is the exact
fallback reason; `PollClient.poll` returns it in a `PollResult` instead of raising.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple

import aiohttp
from yarl import URL

from ome_routing import __version__
from ome_routing.core.durations import Duration
from ome_routing.core.report import Reading, ReportError, parse_report
from ome_routing.observer import failures
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.deadlines import Deadlines
from ome_routing.observer.failures import Outcome, PollFailure

METHODS = ("GET", "POST")
#: Idle keep-alive connections close after this long. Reuse helps homes that share a
#: host (a shared ingress) and are polled often; homes on distinct hosts polled every
#: `period` seconds would otherwise each hold an idle socket.
DEFAULT_KEEPALIVE_SECONDS = 5.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: `Accept-Encoding: identity` asks for the body as it is: the observer never decompresses.
#: Naming it here, rather than skipping aiohttp's default, keeps its per-request header
#: work on the short path.
_HEADERS = {
    "Accept": "application/json",
    "Accept-Encoding": "identity",
    "User-Agent": f"ome-routing/{__version__}",
}


@dataclass(frozen=True, slots=True)
class PollRequest:
    """A request ready to send: where, and with which method."""

    url: URL
    method: str


class PollResult(NamedTuple):
    """How one poll ended: a reading, or the fallback reason why there is none.

    A named tuple: one is made for every poll, and it is the cheapest immutable record.
    """

    outcome: Outcome
    reading: Reading | None
    reason: str | None
    #: seconds spent waiting for a budget slot
    waited: float
    #: seconds from sending the request to the end of the answer (0 if never sent)
    latency: float


def _check_endpoint(text: str) -> URL:
    if not text:
        raise failures.invalid_target("endpoint is empty")
    if _CONTROL.search(text):
        raise failures.invalid_target(f"endpoint {text!r} contains a control character")
    try:
        url = URL(text)
    except ValueError as err:
        raise failures.invalid_target(f'endpoint "{text}" is not a URL: {err}') from None
    if url.user is not None or url.password is not None:
        shown = url.with_user(None)
        raise failures.invalid_target(f'endpoint "{shown}" must not carry credentials')
    if url.scheme not in ("http", "https"):
        raise failures.invalid_target(f'endpoint "{text}" must be an http or https URL')
    if not url.host:
        raise failures.invalid_target(f'endpoint "{text}" has no host')
    if url.port == 0:
        raise failures.invalid_target(f'endpoint "{text}" has port 0')
    if url.raw_query_string or url.raw_fragment or "?" in text or "#" in text:
        raise failures.invalid_target(f'endpoint "{text}" must not carry a query or fragment')
    return url


def join_poll_url(endpoint: str, path: str) -> URL:
    """The poll URL: the endpoint followed by the path, with one `/` between them.

    `http://llm.worker-a.example.com/qwen3-0-6b/qwen3-0-6b` and `/capacity` give
    `http://llm.worker-a.example.com/qwen3-0-6b/qwen3-0-6b/capacity`.
    """
    _check_endpoint(endpoint)
    if not path.startswith("/"):
        raise failures.invalid_url(f'path "{path}" must start with "/"')
    joined = endpoint.rstrip("/") + path
    if _CONTROL.search(joined):
        raise failures.invalid_url(f"{joined!r} contains a control character")
    try:
        return URL(joined)
    except ValueError as err:
        raise failures.invalid_url(f'"{joined}": {err}') from None


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise failures.unbuildable(f'method "{method}" is not GET or POST')
    return method


def build_request(endpoint: str, path: str, method: str) -> PollRequest:
    """The request for a home's endpoint and its poll's path and method."""
    return PollRequest(url=join_poll_url(endpoint, path), method=_check_method(method))


def request_for_url(url: str, method: str) -> PollRequest:
    """The request for a full poll URL, checked as an endpoint is."""
    return PollRequest(url=_check_endpoint(url), method=_check_method(method))


def _out_of_time(answered: bool, timeout: Duration) -> PollFailure:
    """The time ran out: before the answer came (unreachable), or while reading it."""
    if answered:
        return failures.incomplete(failures.timed_out(timeout))
    return failures.unreachable(failures.timed_out(timeout))


def _failed(failure: PollFailure, waited: float, latency: float) -> PollResult:
    return PollResult(failure.outcome, None, failure.reason, waited, latency)


class PollClient:
    """Sends polls over one pooled connection set, within a shared request budget.

    Make it inside a running event loop; close it with `await client.close()` (or use it
    as an async context manager). `resolver` resolves host names (aiohttp's threaded
    resolver by default).
    """

    def __init__(
        self,
        budget: RequestBudget,
        max_response_bytes: int,
        *,
        resolver: aiohttp.abc.AbstractResolver | None = None,
        keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS,
    ) -> None:
        if max_response_bytes < 1:
            raise ValueError(f"maxResponseBytes must be positive, got {max_response_bytes}")
        self._budget = budget
        self._limit = max_response_bytes
        connector = aiohttp.TCPConnector(
            limit=budget.limit,
            limit_per_host=0,
            keepalive_timeout=keepalive_seconds,
            resolver=resolver if resolver is not None else aiohttp.ThreadedResolver(),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
            headers=_HEADERS,
            raise_for_status=False,
        )
        self._closing = False
        self._loop = asyncio.get_running_loop()
        self._deadlines = Deadlines(self._loop)

    @property
    def budget(self) -> RequestBudget:
        return self._budget

    @property
    def max_response_bytes(self) -> int:
        return self._limit

    async def close(self) -> None:
        """Close every connection; polls after this fail as not submitted."""
        self._closing = True
        await self._session.close()
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
        self, request: PollRequest, timeout: Duration, task: asyncio.Task[Any] | None = None
    ) -> PollResult:
        """Send one poll once a budget slot is free, and read its answer.

        `task` is the task that awaits this (looked up if not given): the timeout
        cancels it. One coroutine from the slot to the reading, since it runs for every
        poll: each level of coroutine costs on every resumption.
        """
        if self._closing:
            return _failed(failures.not_submitted("observer is stopping"), 0.0, 0.0)
        budget = self._budget
        waited = 0.0 if budget.try_acquire() else await budget.acquire()
        loop = self._loop
        start: float | None = None  # when the request went out, if it did
        try:
            if self._closing:
                raise failures.not_submitted("observer is stopping")
            # the timeout's start is `start`, when the request goes out
            start = loop.time()
            deadlines = self._deadlines
            limit = deadlines.arm(start + timeout.seconds, task)
            answered = timed_out = False
            try:
                try:
                    async with self._session.request(
                        request.method, request.url, allow_redirects=False
                    ) as response:
                        answered = True
                        try:
                            if response.status != 200:
                                raise failures.http_status(response.status)
                            length = response.content_length
                            if length is None:
                                body = await self._read_unsized(response)
                            elif length > self._limit:
                                raise failures.too_large(self._limit)
                            else:
                                # the parser reads no more than the declared length
                                body = await response.read()
                        except BaseException:
                            response.close()
                            raise
                finally:
                    timed_out = deadlines.disarm(limit)
            except asyncio.CancelledError:
                if not timed_out:
                    raise
                raise _out_of_time(answered, timeout) from None
            except TimeoutError:
                raise _out_of_time(answered, timeout) from None
            except aiohttp.ClientError as err:
                if answered:
                    raise failures.body_failure(err) from None
                raise failures.connection_failure(err) from None
            except OSError as err:
                if answered:
                    raise failures.body_failure(err) from None
                wrapped = aiohttp.ClientOSError(err.errno, err.strerror)
                raise failures.connection_failure(wrapped) from None
            try:
                reading = parse_report(body)
            except ReportError as err:
                raise PollFailure(Outcome.INVALID_REPORT, err.reason) from None
        except PollFailure as failure:
            return _failed(failure, waited, 0.0 if start is None else loop.time() - start)
        finally:
            budget.release()
        return PollResult(Outcome.OK, reading, None, waited, loop.time() - start)

    async def _read_unsized(self, response: aiohttp.ClientResponse) -> bytes:
        """A body of no declared length (chunked, or up to the end of the connection)."""
        limit = self._limit
        chunks: list[bytes] = []
        total = 0
        while True:
            # Ask for one byte past the limit at most, so an endless body stops there.
            chunk = await response.content.read(limit + 1 - total)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise failures.too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)
