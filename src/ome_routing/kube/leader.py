"""Leader election on a `coordination.k8s.io/v1` Lease, the way client-go does it, and the
gate that every write of the leader's work passes.

Only the leader polls and writes. A replica acquires the Lease when it is free or its
holder has stopped renewing it, and renews it every `retry_period`. Expiry is judged on
this replica's own monotonic clock from the moment it last saw the Lease change, not from
the `renewTime` stamped by another replica, so clock skew between replicas cannot steal
a Lease.

**The gate.** The leader may write only while it is inside its renew deadline, measured on
`time.monotonic()` from the moment its last successful renewal was *sent* (the stamp
another replica's expiry is counted from is later than that). `FencedClient`
(`kube.fencing`) asks `check_write` before every write it sends, so the routing
controller, the publisher and anything else that writes with it are covered alike. The
monotonic clock goes on counting while the process is stopped (SIGSTOP, a frozen
container, a node under memory pressure), so a replica that wakes after its deadline
sees at once that it has passed: its first write is refused (`NotLeader`) and it steps
down. A renewal that finds another holder steps down at once too, and the renewal loop
steps down at the deadline itself even when nothing writes. The gate is asked again at
the wire, once the write holds a connection and just before its bytes leave, and it
gives each write a total deadline of the renew margin (lease duration less renew
deadline), so that a write let through before the deadline has ended before the earliest
moment a standby may take over (`kube.fencing`): a write held up between the two checks is refused, a create included.

A standby retries acquisition every retry period jittered by up to `JITTER_FACTOR` of it,
as client-go's `wait.JitterUntil`, so that standbys do not retry in lockstep.

A whole VM suspended is the case the monotonic clock cannot see: it does not count the
time the machine was suspended. What covers it is the second fence: every write of a
TrafficMap, route, Service or slice carries the resourceVersion of the object it was
computed from (`kube.publishing`, and the routing controller's writes), so a write that
was on its way when the machine stopped fails with 409 once the new leader has written
that object; and the first renewal after waking, within one retry period, finds the new
holder and steps down.

**Step-down: the process exits.** When leadership is lost the work is cancelled with the
gate already shut, so nothing it still has in flight writes (no status, no spec, no
route, no Service), the Lease is not touched, and `run` raises `LeadershipLost`, on
which the command exits with code 1, as controller-runtime's manager does (and OME's
with it: `Failed to start manager`, error `leader election lost`). Kubernetes restarts
the container, which comes back as a standby. We exit rather than become a standby in
the same process because a new process holds nothing of the old leadership (no cache,
no observer window, no task, no connection with a request queued in it) that could
write by mistake, and a new leadership starts every home over anyway; the cost is a
container restart when the API server is unreachable for longer than the renew
deadline.

On shutdown (cancellation of `run`) the `lead` coroutine is cancelled and awaited first,
with the gate open while the deadline holds, so that the reconciles in flight finish
their writes; then the gate shuts and the Lease is released, so that a standby takes
over at once without waiting for expiry and never writes alongside this replica.

Errors: API failures while acquiring or renewing, refused connections included (the API
server away), are retried (logged at debug); `run` ends when cancelled, when `lead`
ends, or with `LeadershipLost`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from ome_routing.core.durations import SECOND, Duration
from ome_routing.kube.fencing import NotLeader

log = logging.getLogger(__name__)

#: client-go's `leaderelection.JitterFactor`
JITTER_FACTOR = 1.2
#: what the command logs when it exits on a lost Lease, as controller-runtime's manager
LOST = "leader election lost"


class LeadershipLost(Exception):
    """This replica stopped leading; the process should exit."""


def timing_problem(lease: Duration, renew: Duration, retry: Duration) -> str | None:
    """OME's check of `--leader-elect-lease-duration`, `-renew-deadline`, `-retry-period`.

    A zero duration is one not supplied; none supplied is fine (the defaults apply).
    """
    durations = (lease.nanoseconds, renew.nanoseconds, retry.nanoseconds)
    supplied = sum(1 for d in durations if d != 0)
    if supplied == 0:
        return None
    got = f"got lease-duration={lease} renew-deadline={renew} retry-period={retry}"
    if supplied != 3:
        return f"leader election timings are supplied as a set: {got}"
    if any(d <= 0 for d in durations):
        return f"leader election timings must be positive: {got}"
    if lease.nanoseconds <= renew.nanoseconds:
        return (
            f"leader election lease-duration ({lease}) must exceed renew-deadline ({renew}), "
            "otherwise the lease expires while its holder is still renewing"
        )
    jittered = Duration(int(JITTER_FACTOR * float(retry.nanoseconds)))
    if renew.nanoseconds <= jittered.nanoseconds:
        return (
            f"leader election renew-deadline ({renew}) must exceed retry-period jittered by "
            f"{JITTER_FACTOR:.1f}x ({jittered}), otherwise a window holds no complete attempt"
        )
    return None


@dataclass(frozen=True)
class ElectionSettings:
    """Timing of the election, in seconds; the defaults are client-go's (15s / 10s / 2s)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        problem = timing_problem(
            Duration.of_seconds(self.lease_duration),
            Duration.of_seconds(self.renew_deadline),
            Duration.of_seconds(self.retry_period),
        )
        if problem is not None or self.lease_duration == 0:
            raise ValueError(problem or "leader election timings must be positive")

    @classmethod
    def from_flags(
        cls, lease: Duration | None, renew: Duration | None, retry: Duration | None
    ) -> ElectionSettings:
        """The flags' timings, or the defaults when none is given; raises `ValueError`
        with OME's message when they do not form a set the elector accepts."""
        given = [d or Duration(0) for d in (lease, renew, retry)]
        problem = timing_problem(*given)
        if problem is not None:
            raise ValueError(problem)
        if all(d.nanoseconds == 0 for d in given):
            return cls()
        return cls(*(d.nanoseconds / SECOND for d in given))


@dataclass(frozen=True)
class Observation:
    """The Lease as last seen, and when (monotonic) its holder or renewTime last changed."""

    holder: str | None
    renew_time: datetime | None
    seen_change_at: float


class _Attempt(enum.Enum):
    HELD = "held"  # acquired or renewed
    FAILED = "failed"  # the API answered with an error, or could not be reached
    TAKEN = "taken"  # another replica holds the Lease and renews it


def micro_now() -> datetime:
    """The current time for a Lease's MicroTime fields.

    lightkube writes a time whose microseconds are 0 without a fraction, which the API
    server refuses for a MicroTime; one microsecond later is as good a stamp.
    """
    now = datetime.now(UTC)
    return now if now.microsecond else now.replace(microsecond=1)


async def _stop_all(*tasks: asyncio.Task[Any]) -> None:
    """Cancel `tasks` and wait until each has finished, even if the caller is cancelled."""
    for task in tasks:
        task.cancel()
    stopped = asyncio.ensure_future(asyncio.gather(*tasks, return_exceptions=True))
    try:
        await asyncio.shield(stopped)
    except asyncio.CancelledError:
        await stopped
        raise


def jittered(period: float, draw: float) -> float:
    """client-go's `wait.Jitter(period, JITTER_FACTOR)` for a draw in [0, 1): a wait
    between `period` and `(1 + JITTER_FACTOR) * period`."""
    return period * (1.0 + draw * JITTER_FACTOR)


def lease_is_free(
    observation: Observation | None, identity: str, now: float, duration: float
) -> bool:
    """Whether `identity` may take the Lease at monotonic time `now`."""
    if observation is None or not observation.holder or observation.holder == identity:
        return True
    return observation.seen_change_at + duration <= now


class LeaderElector:
    """Holds one Lease for one identity, and is the write gate; see the module docstring."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        settings: ElectionSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self._kube = client
        self._draw = draw
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._settings = settings or ElectionSettings()
        self._clock = clock
        self._observed: Observation | None = None
        #: leading: set once the Lease is acquired, cleared when this replica stops leading
        self._leading = False
        #: stepped down: set when leadership is lost; from then on no request is sent
        self._stepped_down = False
        #: when (monotonic) the last successful acquisition or renewal was sent
        self._renewed_at = float("-inf")
        self._lost: asyncio.Event | None = None
        self.lost_reason = ""
        #: when (monotonic) a read of the Lease last got an answer (`answering`)
        self._answered_at = float("-inf")

    # --- the gate -----------------------------------------------------------------------

    def may_write(self) -> bool:
        """Whether a write may be sent now: leading, and inside the renew deadline."""
        return self._leading and (self._clock() - self._renewed_at < self._settings.renew_deadline)

    def check_write(self, request: str) -> float:
        """The gate of `FencedClient`: raise `NotLeader` (and step down) past the deadline.

        Returns the seconds the write may still take: the renew margin (lease duration
        less renew deadline). A write let through before the deadline and ended within
        the margin ends before the earliest moment a standby may take the Lease over,
        which counts a full lease duration from a renewal sent no earlier than ours.
        """
        if self.may_write():
            return self._settings.lease_duration - self._settings.renew_deadline
        if self._leading:
            self._step_down(f"renew deadline passed before {request}")
        log.debug("write dropped: not the leader", extra={"request": request})
        raise NotLeader(f"{request}: not the leader")

    def answering(self) -> bool:
        """Whether a read of the Lease got an answer within the renew deadline: a standby
        that is campaigning for real (its readiness, `kube.health`)."""
        return self._clock() - self._answered_at < self._settings.renew_deadline

    def check_read(self, request: str) -> None:
        if self._stepped_down:
            raise NotLeader(f"{request}: not the leader")

    def _step_down(self, reason: str) -> None:
        """Shut the gate at once; `run` then cancels the work and raises `LeadershipLost`."""
        if self._stepped_down:
            return
        self._leading = False
        self._stepped_down = True
        self.lost_reason = reason
        log.warning(
            "lost leadership",
            extra={"lease": self._name, "identity": self.identity, "reason": reason},
        )
        if self._lost is not None:
            self._lost.set()

    # --- running ------------------------------------------------------------------------

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Acquire, then lead until `lead` returns or leadership is lost.

        Returns when `lead` returns and re-raises what it raises, releasing the Lease on
        the way out (also when cancelled). Raises `LeadershipLost`, without a further API
        call, when the renew deadline passed or another replica took the Lease.
        """
        lost = self._lost = asyncio.Event()
        release = True
        try:
            await self._acquire()
            self._leading = True
            log.info("became leader", extra={"lease": self._name, "identity": self.identity})
            leading = asyncio.create_task(lead(), name="leading")
            renewing = asyncio.create_task(self._keep_renewing(), name="renewing")
            losing = asyncio.create_task(lost.wait(), name="losing")
            try:
                tasks = {leading, renewing, losing}
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if _failed_with(leading, NotLeader):
                    self._step_down("a request was refused past the renew deadline")
                # On shutdown the gate stays open while the deadline holds, so that the
                # reconciles in flight finish; on a lost Lease it is already shut.
                await _stop_all(leading, renewing, losing)
                self._leading = False
            if self._stepped_down:
                release = False
                raise LeadershipLost(self.lost_reason)
            leading.result()
        finally:
            self._leading = False
            if release:
                await asyncio.shield(self._release())

    async def _acquire(self) -> None:
        # as client-go's `wait.JitterUntil(..., RetryPeriod, JitterFactor, ...)`, so that
        # standbys started together do not retry in lockstep
        while await self._try_acquire_or_renew() is not _Attempt.HELD:
            await asyncio.sleep(jittered(self._settings.retry_period, self._draw()))

    async def _keep_renewing(self) -> None:
        """Renew every retry period; step down at the deadline or when another holds it."""
        settings = self._settings
        while True:
            await asyncio.sleep(settings.retry_period)
            remaining = self._renewed_at + settings.renew_deadline - self._clock()
            if remaining <= 0:
                self._step_down("renew deadline passed")
                return
            try:
                async with asyncio.timeout(remaining):  # not wait_for (3.11)
                    attempt = await self._try_acquire_or_renew()
            except TimeoutError:
                self._step_down(f"failed to renew lease {self._namespace}/{self._name} in time")
                return
            if attempt is _Attempt.TAKEN:
                holder = self._observed.holder if self._observed else None
                self._step_down(f"lease {self._namespace}/{self._name} is held by {holder}")
                return

    def _observe(self, lease: Lease) -> None:
        spec = lease.spec or LeaseSpec()
        holder, renew = spec.holderIdentity, spec.renewTime
        previous = self._observed
        if previous is None or (previous.holder, previous.renew_time) != (holder, renew):
            self._observed = Observation(holder, renew, self._clock())

    async def _try_acquire_or_renew(self) -> _Attempt:
        sent = self._clock()  # the deadline counts from here: before the Lease is read
        now_wall = micro_now()
        try:
            try:
                lease = await self._kube.get(Lease, self._name, namespace=self._namespace)
            except ApiError as err:
                if err.status.code != 404:
                    raise
                self._answered_at = self._clock()
                await self._kube.create(self._new_lease(now_wall, transitions=0))
                self._observed = Observation(self.identity, now_wall, self._clock())
                self._renewed_at = sent
                return _Attempt.HELD
            self._answered_at = self._clock()
            self._observe(lease)
            if not lease_is_free(
                self._observed, self.identity, self._clock(), self._lease_duration(lease)
            ):
                return _Attempt.TAKEN
            spec = lease.spec or LeaseSpec()
            taking_over = spec.holderIdentity != self.identity
            spec.holderIdentity = self.identity
            spec.leaseDurationSeconds = int(self._settings.lease_duration)
            spec.renewTime = now_wall
            if taking_over:
                spec.acquireTime = now_wall
                had_holder = bool(lease.spec and lease.spec.holderIdentity)
                spec.leaseTransitions = (spec.leaseTransitions or 0) + int(had_holder)
            lease.spec = spec
            await self._kube.replace(lease)  # carries the resourceVersion it read
            self._observed = Observation(self.identity, now_wall, self._clock())
            self._renewed_at = sent
            return _Attempt.HELD
        except ApiError as err:
            log.debug("lease %s: %s", self._name, err.status.message)
            return _Attempt.FAILED
        except Exception as err:  # any transport failure (the API server away): try again
            log.debug("lease %s: %s", self._name, err)
            return _Attempt.FAILED

    def _lease_duration(self, lease: Lease) -> float:
        seconds = lease.spec.leaseDurationSeconds if lease.spec else None
        return float(seconds) if seconds else self._settings.lease_duration

    def _new_lease(self, now: datetime, transitions: int) -> Lease:
        return Lease(
            metadata=ObjectMeta(name=self._name, namespace=self._namespace),
            spec=LeaseSpec(
                holderIdentity=self.identity,
                leaseDurationSeconds=int(self._settings.lease_duration),
                acquireTime=now,
                renewTime=now,
                leaseTransitions=transitions,
            ),
        )

    async def _release(self) -> None:
        """Give the Lease up if we hold it, so that a standby need not wait for expiry."""
        await release_lease(self._kube, self._namespace, self._name, self.identity)


def mark_released(lease: Lease, identity: str) -> bool:
    """Make `lease` released, as client-go releases one (no holder, a duration of 1 s,
    renewed now), if `identity` holds it; whether it did (then it is to be replaced)."""
    if lease.spec is None or lease.spec.holderIdentity != identity:
        return False
    lease.spec.holderIdentity = None
    lease.spec.leaseDurationSeconds = 1
    lease.spec.renewTime = micro_now()
    return True


async def release_lease(
    client: AsyncClient, namespace: str, name: str, identity: str, *, tries: int = 1
) -> None:
    """Read the Lease and give it up if `identity` holds it; best effort (an error is
    logged at debug): a Lease not released expires anyway. A conflict (the Lease written
    between the read and the write) reads it again, up to `tries` reads in all."""
    for _ in range(tries):
        try:
            lease = await client.get(Lease, name, namespace=namespace)
            if mark_released(lease, identity):
                await client.replace(lease)
            return
        except ApiError as err:
            log.debug("releasing lease %s: %s", name, err.status.message or err)
            if err.status.code != 409:
                return
        except Exception as err:
            log.debug("releasing lease %s: %s", name, err)
            return


def _failed_with(task: asyncio.Task[Any], kind: type[BaseException]) -> bool:
    return task.done() and not task.cancelled() and isinstance(task.exception(), kind)
