"""The health prober: one schedule per home, each home's probe state, state changes.

Each home is probed every `period` with the probe's method, no body, no credentials
and no redirects, through the same `PollClient` as capacity polls: the same request
budget (one `maxConcurrentRequests` for both, shared fairly by namespace: `budget`),
connections, byte cap and timeout. The
status decides (`core.probes.classify`); at most `maxResponseBytes` of the body are
read and discarded, and a longer body is not a failure.

Scheduling is OME's: a new home is probed at once; a home restored from its map's
`entries[].probe` is due one period after its `lastProbeTime` (at once if that is
missing or in the future). The homes set before `start()` with no state to restore
(those of a controller that starts or gains leadership, on a map that was never probed)
are spread over their first period by a stable hash of their key, as the capacity
observer spreads its first polls: thousands of homes probed at once would keep probing in
one burst every period, since each deadline advances from the last. When a probe is dispatched, the home's next deadline
advances by whole periods (`scheduling.advance`), so a probe that ran late lands on the
next period boundary. A home whose probe is still underway when it is due again is
skipped until the next deadline. A probe that could not be submitted (the prober is
stopping) leaves the state as it was.

`on_change(key, state)` is called, from the event loop, after every attempt (its
`lastProbeTime` is part of the state). The prober never computes weights.

Errors: none escape a probe; each attempt ends in a verdict (`core.probes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import NamedTuple, Protocol

from ome_routing.core.proberules import ProbePolicy
from ome_routing.core.probes import (
    NOT_PROBED,
    Attempt,
    ProbeResult,
    ProbeState,
    Restored,
    body_error,
    classify,
    not_run,
    record_attempt,
    transport_error,
)
from ome_routing.observer.budget import DEFAULT_FLOW
from ome_routing.observer.failures import Outcome, PollFailure
from ome_routing.observer.polling import PollClient, poll_target, probe_request
from ome_routing.observer.request import PollRequest
from ome_routing.observer.scheduling import DueQueue, advance, first_offset
from ome_routing.observer.urls import URLError, join_path

log = logging.getLogger("ome_routing.prober")

ProbeKey = Hashable
Clock = Callable[[], datetime]
OnProbe = Callable[[ProbeKey, ProbeState], None]


class ProbeEvent(NamedTuple):
    """One finished probe, for metrics: times are event-loop seconds."""

    key: ProbeKey
    result: ProbeResult
    #: seconds from when the probe was due until its request went out
    waited: float
    latency: float


class ProbeStats(Protocol):
    def probe_finished(self, event: ProbeEvent) -> None: ...


class _NoStats:
    def probe_finished(self, event: ProbeEvent) -> None:
        return None


@dataclass(eq=False, slots=True)
class _Target:
    key: ProbeKey
    endpoint: str
    policy: ProbePolicy
    #: the request to send, or the inconclusive attempt of why none can be built
    request: PollRequest | Attempt
    state: ProbeState
    #: when the next probe is due, in event-loop seconds
    due: float = 0.0
    probing: asyncio.Task[None] | None = None
    retired: bool = False
    #: the budget's flow of its probes: the InferenceService's namespace
    flow: str = DEFAULT_FLOW


def probe_url_request(endpoint: str, policy: ProbePolicy) -> PollRequest | Attempt:
    """The probe's request: `url.JoinPath` of the canonical endpoint and the path.

    Raises `PollFailure` for an endpoint that is not a usable URL: OME skips that home.
    """
    target = poll_target(endpoint)
    try:
        url = join_path(target, policy.path)
    except URLError as err:
        return not_run(f"join endpoint and probe path: {err}")
    try:
        return probe_request(url, policy.method)
    except PollFailure as failure:
        return not_run(_detail(failure))


def _detail(failure: PollFailure) -> str:
    """The failure's text without its capacity family's prefix."""
    return failure.reason.split(": ", 1)[-1]


def attempt_of(status: int | None, failure: PollFailure | None, policy: ProbePolicy) -> Attempt:
    """The verdict of an answer (its status) or of the failure that stopped it."""
    if status is not None:
        return classify(status, policy)
    assert failure is not None
    if failure.outcome is Outcome.INVALID_REQUEST:
        return not_run(_detail(failure))
    if failure.outcome is Outcome.READ_FAILED:
        return body_error(_detail(failure))
    return transport_error(_detail(failure))


class Prober:
    """Probes every home it holds and keeps each home's state. Use from one event loop."""

    def __init__(
        self,
        client: PollClient,
        on_change: OnProbe,
        *,
        clock: Clock,
        stats: ProbeStats | None = None,
    ) -> None:
        self._poller = client
        self._on_change = on_change
        self._clock = clock
        self._stats: ProbeStats = stats if stats is not None else _NoStats()
        self._targets: dict[ProbeKey, _Target] = {}
        self._queue: DueQueue[_Target] = DueQueue()
        self._wake = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._probes: set[asyncio.Task[None]] = set()
        #: probes underway (or waiting for a budget slot) by flow: at most as many in one
        #: flow as the budget has slots, so that a flow's probes are never more tasks than
        #: its line can serve at once; a target due while its flow has that many waits in
        #: `_deferred` (its own flow's, so that it never holds up another flow's probes)
        self._cap = client.budget.limit
        self._underway: dict[str, int] = {}
        self._deferred: dict[str, deque[_Target]] = {}

    # --- the homes --------------------------------------------------------------

    def set_target(
        self,
        key: ProbeKey,
        endpoint: str,
        policy: ProbePolicy,
        restored: Restored | None = None,
        flow: str = DEFAULT_FLOW,
    ) -> ProbeState | None:
        """Add a home (with its restored state, if any), or keep one; returns its state.

        `flow` is the budget's flow its probes wait in (the InferenceService's namespace).

        The key carries the home's identity (its endpoint and the probe's digest), so a
        key that is held already is left as it is. Returns None for an endpoint that is
        not a usable URL: that home is not probed.
        """
        held = self._targets.get(key)
        if held is not None:
            return held.state
        try:
            request = probe_url_request(endpoint, policy)
        except PollFailure:
            return None
        state = restored.state if restored is not None else NOT_PROBED
        target = _Target(key, endpoint, policy, request, state, flow=flow)
        self._targets[key] = target
        now = asyncio.get_running_loop().time()
        due = now
        if restored is not None and restored.next_probe is not None:
            due = now + max((restored.next_probe - self._clock()).total_seconds(), 0.0)
        elif restored is None and self._dispatcher is None:
            due = now + first_offset(key, policy.period.seconds)
        self._schedule(target, due)
        return state

    def remove_target(self, key: ProbeKey) -> None:
        """Stop probing a home and forget its state; unknown keys are ignored."""
        target = self._targets.pop(key, None)
        if target is not None:
            target.retired = True
            if target.probing is not None:
                target.probing.cancel()

    def state(self, key: ProbeKey) -> ProbeState | None:
        target = self._targets.get(key)
        return target.state if target is not None else None

    def keys(self) -> list[ProbeKey]:
        return list(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    # --- start and stop -----------------------------------------------------------

    async def start(self) -> None:
        if self._dispatcher is None:
            self._dispatcher = asyncio.get_running_loop().create_task(
                self._dispatch(), name="health prober"
            )

    async def stop(self) -> None:
        """Stop dispatching, cancel every probe underway and wait for them."""
        dispatcher, self._dispatcher = self._dispatcher, None
        tasks = [t for t in (dispatcher, *self._probes) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._probes.clear()

    # --- the schedule -----------------------------------------------------------------

    def _schedule(self, target: _Target, due: float) -> None:
        target.due = due
        self._queue.push(target, due, target.policy.period.seconds)
        self._wake.set()

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        queue = self._queue
        while True:
            now = loop.time()
            target = queue.pop_due(now)
            if target is None:
                first = queue.first_due()
                self._wake.clear()
                delay = None if first is None else first - now
                # not `asyncio.wait_for`: on Python 3.11 it swallows a cancellation that
                # arrives as the wake-up completes, and `stop` would wait for ever
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                continue
            if target.retired:
                continue
            flow = target.flow
            underway = self._underway.get(flow, 0)
            if underway >= self._cap:
                # its flow has as many probes underway as the budget has slots: it waits
                # for one of them to end (its flow's deferred go back on the schedule in turn)
                self._deferred.setdefault(flow, deque()).append(target)
                continue
            due = target.due
            self._schedule(target, advance(due, now, target.policy.period.seconds))
            if target.probing is not None:
                continue  # still underway: skipped until its next deadline
            self._underway[flow] = underway + 1
            task = loop.create_task(self._probe(target, due, loop))
            target.probing = task
            self._probes.add(task)
            task.add_done_callback(partial(self._finished, flow))

    def _finished(self, flow: str, task: asyncio.Task[None]) -> None:
        """A probe task ended (also one cancelled before it ran): its place is free."""
        self._probes.discard(task)
        underway = self._underway[flow] - 1
        if underway:
            self._underway[flow] = underway
        else:
            del self._underway[flow]
        deferred = self._deferred.get(flow)
        while deferred:
            target = deferred.popleft()
            if not target.retired:
                self._queue.push(target, target.due)
                self._wake.set()
                break
        if deferred is not None and not deferred:
            del self._deferred[flow]

    async def _probe(self, target: _Target, due: float, loop: asyncio.AbstractEventLoop) -> None:
        policy = target.policy
        request = target.request
        picked = loop.time()
        try:
            if isinstance(request, Attempt):
                attempt, waited, latency = request, picked - due, 0.0
            else:
                answer = await self._poller.probe(request, policy.timeout, flow=target.flow)
                if answer.failure is not None and answer.failure.outcome is Outcome.NOT_SUBMITTED:
                    return  # nothing was asked: the state stays as it was
                attempt = attempt_of(answer.status, answer.failure, policy)
                waited = picked - due + answer.waited
                latency = answer.latency
        finally:
            target.probing = None
        if target.retired:
            return
        target.state = record_attempt(target.state, attempt, self._clock(), policy)
        self._stats.probe_finished(
            ProbeEvent(target.key, attempt.result, max(waited, 0.0), latency)
        )
        try:
            self._on_change(target.key, target.state)
        except Exception:
            log.exception("probe of %r: reporting its state failed", target.key)
