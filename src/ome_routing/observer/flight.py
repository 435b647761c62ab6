"""One capacity poll as callbacks: from a held budget slot to its `PollResult`.

A poll runs for every home every period, so its path is kept to plain calls: the
connection's protocol hands the answer straight to the poll's `Flight` (no future, no
coroutine to wake on the next turn of the event loop), its time limit is one entry of
the client's shared `Deadlines` that calls back, and the result goes to the caller's
callback. Only opening a connection needs a coroutine (name resolution, the TCP and TLS
handshakes): it runs in a task of its own, named after the observer's pollers.

The behaviour is `PollClient.poll`'s, which runs on it: the timeout starts when the
request goes out; no status line and headers within it is "unreachable", running out
while reading the body "did not complete"; a reused connection that the server had
closed is retried once on a fresh one for a GET; the body is parsed as a `Report`.

Identical bodies are parsed once: `parse_report` is a function of the bytes alone, and
a reporter answers every home it serves with the same report until its next stamp, so
the reading of a short body is kept (`ReportCache`) and shared by the windows that
record it; each window still records it at its own poll's time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from ome_routing.core.durations import Duration
from ome_routing.core.report import Reading, ReportError, parse_report
from ome_routing.observer import failures
from ome_routing.observer.budget import DEFAULT_FLOW, RequestBudget
from ome_routing.observer.deadlines import Deadlines
from ome_routing.observer.failures import Outcome, PollFailure
from ome_routing.observer.pool import Pool
from ome_routing.observer.request import PollRequest
from ome_routing.observer.transport import CLOSED_EARLY, Connection, StaleConnection

#: The name of the tasks that open a poll's connection (it starts with `observer.WORKER_NAME`).
CONNECT_TASK = "capacity poller connecting"
#: Bodies up to this many bytes have their reading kept.
_CACHED_BODY_BYTES = 512
#: At most this many readings are kept; the cache starts over when it is full.
_CACHED_READINGS = 1024


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


OnResult = Callable[[PollResult], object]


def out_of_time(answered: bool, timeout: Duration) -> PollFailure:
    """The time ran out: before the answer came (unreachable), or while reading it."""
    if answered:
        return failures.incomplete(failures.timed_out(timeout))
    return failures.unreachable(failures.timed_out(timeout))


def failed(failure: PollFailure, waited: float, latency: float) -> PollResult:
    return PollResult(failure.outcome, None, failure.reason, waited, latency)


class Landing(Protocol):
    """Who takes a poll's result apart, with what it polled for (`TaggedFlight`)."""

    def _landed(
        self,
        tag: Any,
        outcome: Outcome,
        reading: Reading | None,
        reason: str | None,
        latency: float,
    ) -> None: ...


class ReportCache(dict[bytes, Reading]):
    """The readings of recent short bodies, by their bytes.

    A dict: a poll looks its body up with `get` (no call of ours), and calls `read` only
    for bytes not seen yet.
    """

    __slots__ = ()

    def read(self, body: bytes) -> Reading:
        """`parse_report(body)`: the kept reading of the same bytes, if there is one."""
        reading = self.get(body)
        if reading is None:
            reading = parse_report(body)  # a ReportError is never kept
            if len(body) <= _CACHED_BODY_BYTES:
                if len(self) >= _CACHED_READINGS:
                    self.clear()
                self[body] = reading
        return reading


class Sender:
    """What every poll of one client shares: the loop, connections, limits and budget."""

    __slots__ = (
        "budget",
        "closing",
        "deadlines",
        "limit",
        "loop",
        "pool",
        "reports",
        "tasks",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        pool: Pool,
        deadlines: Deadlines,
        budget: RequestBudget,
        limit: int,
    ) -> None:
        self.loop = loop
        self.pool = pool
        self.deadlines = deadlines
        self.budget = budget
        #: the byte cap of a body (`maxResponseBytes`)
        self.limit = limit
        self.closing = False
        self.reports = ReportCache()
        #: the tasks that open connections now
        self.tasks: set[asyncio.Task[None]] = set()


class Flight:
    """One poll underway, holding a budget slot; `launch` sends it, `cancel` drops it.

    `on_result` is called once, with the result, unless the poll is cancelled first;
    the slot is given back before it is called. It is also the `Waiter` of its
    connection (`done`, `set_result`, `set_exception`), and its own time limit on the
    client's `Deadlines` (`when`, `expire`).
    """

    __slots__ = (
        "_armed",
        "_connecting",
        "_connection",
        "_flow",
        "_landing",
        "_on_result",
        "_over",
        "_request",
        "_retried",
        "_sender",
        "_start",
        "_tag",
        "_timeout",
        "_waited",
        "when",
    )

    def __init__(
        self,
        sender: Sender,
        request: PollRequest,
        timeout: Duration,
        on_result: OnResult,
        waited: float = 0.0,
        flow: str = DEFAULT_FLOW,
    ) -> None:
        self._sender = sender
        self._request = request
        self._timeout = timeout
        self._on_result = on_result
        self._waited = waited
        #: the budget's flow whose slot the poll holds
        self._flow = flow
        self._start = 0.0
        #: when the time runs out, once the request is sent
        self.when = 0.0
        self._armed = False
        self._connection: Connection | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._over = False
        self._retried = False
        self._landing: Landing | None = None
        self._tag: Any = None

    def launch(self) -> None:
        """Send the request (the caller holds a slot of the budget for it)."""
        sender = self._sender
        if sender.closing:
            failure = failures.not_submitted("observer is stopping")
            self._end(failure.outcome, None, failure.reason, 0.0)
            return
        # the timeout's start is now, when the request goes out
        self._start = start = sender.loop.time()
        self.when = start + self._timeout.seconds
        self._armed = True
        sender.deadlines.add(self)
        request = self._request
        connection = sender.pool.take(request.origin)
        if connection is None:
            self._connect()
        else:
            self._connection = connection
            connection.send_to(self, request.head, sender.limit)

    def cancel(self) -> None:
        """Drop the poll: its connection is closed, its slot given back, nothing reported."""
        if self._over:
            return
        self._over = True
        self._stop_sending()
        sender = self._sender
        if self._armed:
            sender.deadlines.drop(self)
        sender.budget.release(self._flow)

    # --- the connection's answer (`transport.Waiter`) ---------------------------------

    def done(self) -> bool:
        return self._over

    def set_result(self, result: Any, /) -> None:
        if self._over:
            return
        sender = self._sender
        latency = sender.loop.time() - self._start
        reports = sender.reports
        reading = reports.get(result)
        if reading is None:
            try:
                reading = reports.read(result)
            except ReportError as err:
                self._end(Outcome.INVALID_REPORT, None, err.reason, latency)
                return
        self._end(Outcome.OK, reading, None, latency)

    def set_exception(self, exception: BaseException, /) -> None:
        if self._over:
            return
        if isinstance(exception, StaleConnection):
            self._connection = None
            if self._request.method == "GET" and not self._retried:
                # the server closed the kept-alive connection while it was idle
                self._retried = True
                self._connect()
                return
            exception = failures.unreachable(CLOSED_EARLY)
        if not isinstance(exception, PollFailure):
            raise exception
        self._fail(exception)

    # --- inside -------------------------------------------------------------------

    def _connect(self) -> None:
        sender = self._sender
        task = sender.loop.create_task(self._open(), name=CONNECT_TASK)
        self._connecting = task
        sender.tasks.add(task)
        task.add_done_callback(sender.tasks.discard)

    async def _open(self) -> None:
        try:
            connection = await self._sender.pool.connect(self._request.origin)
        except PollFailure as failure:
            self._connecting = None
            self._fail(failure)
            return
        self._connecting = None
        if self._over:
            connection.abort()
            return
        self._connection = connection
        connection.send_to(self, self._request.head, self._sender.limit)

    def expire(self) -> None:
        """The time ran out (called by the client's `Deadlines`)."""
        if self._over:
            return
        connection = self._connection
        answered = connection is not None and connection.answered
        self._stop_sending()
        self._fail(out_of_time(answered, self._timeout))

    def _stop_sending(self) -> None:
        connection, task = self._connection, self._connecting
        self._connection = self._connecting = None
        if connection is not None:
            connection.abort()
        if task is not None:
            task.cancel()

    def _fail(self, failure: PollFailure) -> None:
        latency = self._sender.loop.time() - self._start
        self._end(failure.outcome, None, failure.reason, latency)

    def _end(
        self, outcome: Outcome, reading: Reading | None, reason: str | None, latency: float
    ) -> None:
        self._over = True
        self._connection = None
        sender = self._sender
        if self._armed:
            sender.deadlines.drop(self)
        sender.budget.release(self._flow)
        # the result handed over, the slot being free: field by field to a landing (a
        # `TaggedFlight`), or as a `PollResult` (no landing: not the flight itself, which
        # would make a cycle of every poll)
        landing = self._landing
        if landing is None:
            self._on_result(PollResult(outcome, reading, reason, self._waited, latency))
        else:
            landing._landed(self._tag, outcome, reading, reason, latency)


class TaggedFlight(Flight):
    """A poll whose result goes to `landing._landed(tag, ...)`, field by field.

    The observer's: one poll a home a period, so no `PollResult` and no bound callback
    are made for it; `tag` is the home.
    """

    __slots__ = ()

    def __init__(
        self,
        sender: Sender,
        request: PollRequest,
        timeout: Duration,
        landing: Landing,
        tag: Any,
        flow: str = DEFAULT_FLOW,
    ) -> None:
        # Flight's fields set here rather than through its `__init__`: one call less a poll;
        # `_on_result` and `_waited` make a `PollResult`, which a tagged flight does not
        self._sender = sender
        self._request = request
        self._timeout = timeout
        self._start = self.when = 0.0
        self._armed = self._over = self._retried = False
        self._connection = None
        self._connecting = None
        self._landing = landing
        self._tag = tag
        self._flow = flow
