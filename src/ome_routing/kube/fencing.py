"""The write gate: one door that every API request of the leader's work goes through.

`FencedClient` is lightkube's `AsyncClient` whose requests pass a `WriteGate` on their
way out. The gate sits in the send of the client's request layer
(`lightkube_adapter.filter_sends`), the one call that every request of lightkube's goes
through (create, replace, patch, apply, delete, deletecollection, list,
watch, and a request built by hand such as `resources.fenced_delete`), so no writer of
the process can go round it, and nothing has to remember to ask:

- a write (any method but GET, HEAD and OPTIONS) is sent only while `gate.check_write`
  lets it; the elector's gate lets it while this replica is inside its renew deadline
  (`kube.leader`);
- a read is sent only until the replica has stepped down, so that work that is being
  cancelled makes no further API call of any kind.

**At the wire.** A write is asked about twice: in `send`, before it waits for a pooled
connection, and again once it holds one, immediately before its header bytes and again
before its body bytes are written (httpcore's request `trace` extension, whose callback
runs on the connection with nothing awaited between it and the socket write). A write
that was held up after the first check (a full GC, a long preflight, a wait for a
connection, anything that holds the event loop) is refused by the second if the deadline
passed meanwhile. A late *create* has no resourceVersion to make the API server refuse
it, so this check is what fences creates. A write also carries a total deadline: the
time the gate says it may still take (for the elector, until the earliest moment a
standby may take the Lease over), shorter than the client's per-phase timeouts, so that
no write is still being sent when another replica may lead.

A refused request raises `NotLeader`; a write refused at the wire has sent at most its
headers, which the API server discards with the closed connection. The elector steps
down on the first refusal, so the work that asked is cancelled next (`LeaderElector.run`).

The elector's own Lease requests go through a client of their own, outside the gate:
they are what keeps the gate open, and each carries the resourceVersion it read.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import httpx2
from lightkube import AsyncClient, KubeConfig, SingleConfig

from ome_routing.kube import lightkube_adapter

#: the methods that change nothing
READS = frozenset({"GET", "HEAD", "OPTIONS"})


class NotLeader(Exception):
    """A request refused because this replica no longer leads (or is past its deadline)."""


#: Go's `context.DeadlineExceeded`, as client-go reports a request past its deadline
DEADLINE_EXCEEDED = "context deadline exceeded"
#: the points of httpcore's `trace` extension right before a request's bytes are written
_ON_THE_WIRE = ("send_request_headers.started", "send_request_body.started")


class WriteGate(Protocol):
    def check_write(self, request: str) -> float | None:
        """Return if a write may be sent now; else raise `NotLeader` (and step down).

        The value returned, when not None, is how many seconds the write may still take.
        """

    def check_read(self, request: str) -> None:
        """Return if a read may be sent now; else raise `NotLeader`."""


class _Gated:
    """The gate as a filter of lightkube's request layer (`lightkube_adapter.filter_sends`)."""

    def __init__(self, gate: WriteGate) -> None:
        self._gate = gate

    async def __call__(
        self, req: httpx2.Request, stream: bool, send: lightkube_adapter.Send
    ) -> httpx2.Response:
        request = f"{req.method} {req.url.path}"
        if req.method in READS:
            self._gate.check_read(request)
            return await send(req, stream)
        budget = self._gate.check_write(request)
        req.extensions["trace"] = self._at_the_wire(request)
        try:
            async with asyncio.timeout(budget):
                return await send(req, stream)
        except TimeoutError as err:
            # what client-go's request returns when its context's deadline passes
            raise httpx2.TimeoutException(DEADLINE_EXCEEDED, request=req) from err

    def _at_the_wire(self, request: str) -> Any:
        """httpcore's trace callback: the gate again, just before the bytes are written."""
        gate = self._gate

        async def trace(event: str, _info: dict[str, Any]) -> None:
            if event.endswith(_ON_THE_WIRE):
                gate.check_write(request)

        return trace


class FencedClient(AsyncClient):
    """An `AsyncClient` (same configuration) whose every request passes `gate` first."""

    def __init__(
        self,
        gate: WriteGate,
        config: SingleConfig | KubeConfig | None = None,
        *,
        field_manager: str | None = None,
        trust_env: bool = True,
        timeout: httpx2.Timeout | None = None,
    ) -> None:
        super().__init__(config, timeout=timeout, field_manager=field_manager, trust_env=trust_env)
        lightkube_adapter.filter_sends(self, _Gated(gate))
