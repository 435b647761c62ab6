"""Leader election on a `coordination.k8s.io/v1` Lease, the way client-go does it.

Only the leader polls and writes TrafficMaps. A replica acquires the Lease when it is free or
its holder has stopped renewing it, renews it every `retry_period`, and gives up leadership
when it could not renew within `renew_deadline`. Expiry is judged on this replica's own
monotonic clock from the moment it last saw the Lease change, not from the `renewTime`
stamped by another replica, so clock skew between replicas cannot steal a Lease.

On losing leadership the `lead` coroutine is cancelled; the caller starts every home over
when it leads again. On shutdown (cancellation of `run`) the `lead` coroutine is cancelled
and awaited first, so the writes it has in flight end before anything else, and only then
is the Lease released, so that a standby takes over at once without waiting for expiry and
never writes alongside this replica.

Errors: API failures while acquiring or renewing, refused connections included (the API
server away), are retried (logged at debug); they never escape `run`, which ends only
when cancelled or when `lead` ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ElectionSettings:
    """Timing of the election; the defaults are client-go's (15s / 10s / 2s)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period}s, {self.renew_deadline}s, {self.lease_duration}s"
            )


@dataclass(frozen=True)
class Observation:
    """The Lease as last seen, and when (monotonic) its holder or renewTime last changed."""

    holder: str | None
    renew_time: datetime | None
    seen_change_at: float


def micro_now() -> datetime:
    """The current time for a Lease's MicroTime fields.

    lightkube writes a time whose microseconds are 0 without a fraction, which the API
    server refuses for a MicroTime; one microsecond later is as good a stamp.
    """
    now = datetime.now(UTC)
    return now if now.microsecond else now.replace(microsecond=1)


async def _stop_all(*tasks: asyncio.Task[None]) -> None:
    """Cancel `tasks` and wait until each has finished, even if the caller is cancelled."""
    for task in tasks:
        task.cancel()
    stopped = asyncio.ensure_future(asyncio.gather(*tasks, return_exceptions=True))
    try:
        await asyncio.shield(stopped)
    except asyncio.CancelledError:
        await stopped
        raise


def lease_is_free(
    observation: Observation | None, identity: str, now: float, duration: float
) -> bool:
    """Whether `identity` may take the Lease at monotonic time `now`."""
    if observation is None or not observation.holder or observation.holder == identity:
        return True
    return observation.seen_change_at + duration <= now


class LeaderElector:
    """Holds one Lease for one identity; see the module docstring."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        settings: ElectionSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._settings = settings or ElectionSettings()
        self._clock = clock
        self._observed: Observation | None = None
        self.is_leader = False

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Acquire, lead until leadership is lost, and start over; release when done.

        Returns when `lead` returns, re-raises what it raises, and releases the Lease on
        the way out (also when cancelled).
        """
        try:
            while True:
                await self._acquire()
                self.is_leader = True
                log.info("became leader", extra={"lease": self._name, "identity": self.identity})
                leading = asyncio.create_task(lead(), name="leading")
                renewing = asyncio.create_task(self._keep_renewing(), name="renewing")
                try:
                    done, _ = await asyncio.wait(
                        {leading, renewing}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    # Also when cancelled: the work must have stopped before the Lease is
                    # given up, or a standby could write while this replica still does.
                    self.is_leader = False
                    await _stop_all(leading, renewing)
                if leading in done:
                    leading.result()
                    return
                log.warning(
                    "lost leadership", extra={"lease": self._name, "identity": self.identity}
                )
        finally:
            self.is_leader = False
            await asyncio.shield(self._release())

    async def _acquire(self) -> None:
        while not await self._try_acquire_or_renew():
            await asyncio.sleep(self._settings.retry_period)

    async def _keep_renewing(self) -> None:
        last_renewed = self._clock()
        while True:
            await asyncio.sleep(self._settings.retry_period)
            if await self._try_acquire_or_renew():
                last_renewed = self._clock()
            elif self._clock() - last_renewed >= self._settings.renew_deadline:
                return

    def _observe(self, lease: Lease) -> None:
        spec = lease.spec or LeaseSpec()
        holder, renew = spec.holderIdentity, spec.renewTime
        previous = self._observed
        if previous is None or (previous.holder, previous.renew_time) != (holder, renew):
            self._observed = Observation(holder, renew, self._clock())

    async def _try_acquire_or_renew(self) -> bool:
        now_wall = micro_now()
        try:
            try:
                lease = await self._client.get(Lease, self._name, namespace=self._namespace)
            except ApiError as err:
                if err.status.code != 404:
                    raise
                await self._client.create(self._new_lease(now_wall, transitions=0))
                self._observed = Observation(self.identity, now_wall, self._clock())
                return True
            self._observe(lease)
            if not lease_is_free(
                self._observed, self.identity, self._clock(), self._lease_duration(lease)
            ):
                return False
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
            await self._client.replace(lease)
            self._observed = Observation(self.identity, now_wall, self._clock())
            return True
        except ApiError as err:
            log.debug("lease %s: %s", self._name, err.status.message)
            return False
        except Exception as err:  # any transport failure (the API server away): try again
            log.debug("lease %s: %s", self._name, err)
            return False

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
        try:
            lease = await self._client.get(Lease, self._name, namespace=self._namespace)
            if lease.spec is None or lease.spec.holderIdentity != self.identity:
                return
            lease.spec.holderIdentity = None
            lease.spec.leaseDurationSeconds = 1
            lease.spec.renewTime = micro_now()
            await self._client.replace(lease)
        except Exception as err:  # best effort: the Lease expires anyway
            log.debug("releasing lease %s: %s", self._name, err)
