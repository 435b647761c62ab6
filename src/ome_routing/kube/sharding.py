"""Sharding (ours, off by default): routed services split into virtual shards, each
shard with a `coordination.k8s.io/v1` Lease of its own and exactly one writer.

With `--sharding`, replicas do not elect one leader. Each replica holds a *member* Lease
(`<lease-name>-member-<hash of identity>`) that says it is alive, and the key space (the
routed InferenceServices, by namespace and name) is split into `--shards` virtual shards
(`core.shards.shard_of`), each with its own Lease (`<lease-name>-shard-<NN>`). Replicas
acquire shards by rendezvous hashing over the live members (`core.shards.assign`), and a
holder releases a shard only after its preferred owner is alive, so a shard is never
written by two replicas and never unowned for longer than a Lease duration plus a retry.

**The gate, per shard.** A `ShardLease` is one tenure of one shard: it is the shard's
write gate exactly as `LeaderElector` is the leader's (`kube.leader`): a write may be
sent while the tenure is inside its renew deadline, measured on `time.monotonic()` from
the moment its last successful renewal was sent, and it gets the renew margin as its
total deadline. A tenure that has ended (lost, expired, handed over) refuses every write
and every read for ever; a new acquisition of the same shard is a new `ShardLease`.

Which shard a request is for is carried by the context: `writing_for(lease)` sets
`WRITING_FOR` around a reconcile (asyncio tasks copy the context they are created in, so
the requests of everything the reconcile starts carry it too), and `ShardGate`, the
`WriteGate` of the replica's one `FencedClient`, asks that tenure. A write with no
tenure in its context is refused: in sharded mode every write belongs to a key.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterator

from ome_routing.kube.fencing import NotLeader
from ome_routing.kube.leader import ElectionSettings

log = logging.getLogger(__name__)

#: the shard tenure the requests of the running task are made for (None: no shard)
WRITING_FOR: contextvars.ContextVar[ShardLease | None] = contextvars.ContextVar(
    "ome_routing_writing_for", default=None
)


class ShardLease:
    """One tenure of one shard by this replica: its write gate (see the module docstring).

    The `ShardSet` that holds it calls `renewed(sent_at)` after each successful renewal
    (the monotonic time the renewal was *sent*) and `end(reason)` when the tenure ends.
    """

    def __init__(
        self,
        shard: int,
        settings: ElectionSettings,
        renewed_at: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_expired: Callable[[ShardLease], None] | None = None,
    ) -> None:
        self.shard = shard
        self._settings = settings
        self._clock = clock
        self._renewed_at = renewed_at
        self._ended = False
        self.end_reason = ""
        self._on_expired = on_expired

    @property
    def ended(self) -> bool:
        return self._ended

    def renewed(self, sent_at: float) -> None:
        if not self._ended:
            self._renewed_at = max(self._renewed_at, sent_at)

    def may_write(self) -> bool:
        """Whether a write may be sent now: the tenure holds and is inside its deadline."""
        return not self._ended and self._clock() - self._renewed_at < self._settings.renew_deadline

    def end(self, reason: str) -> None:
        """Shut the gate for good (idempotent)."""
        if self._ended:
            return
        self._ended = True
        self.end_reason = reason
        log.info("shard tenure ended", extra={"shard": self.shard, "reason": reason})

    def check_write(self, request: str) -> float:
        """The gate: the seconds the write may take (the renew margin), or `NotLeader`."""
        if self.may_write():
            return self._settings.lease_duration - self._settings.renew_deadline
        if not self._ended:
            self.end(f"renew deadline passed before {request}")
            if self._on_expired is not None:
                self._on_expired(self)
        raise NotLeader(f"{request}: shard {self.shard} is not held")

    def check_read(self, request: str) -> None:
        if self._ended:
            raise NotLeader(f"{request}: shard {self.shard} is not held")


class ShardGate:
    """The `WriteGate` of a sharded replica's `FencedClient`: asks the tenure in the context.

    Reads with no tenure (the caches' lists and watches) pass; writes with none are refused.
    """

    def check_write(self, request: str) -> float:
        lease = WRITING_FOR.get()
        if lease is None:
            raise NotLeader(f"{request}: no shard tenure in this request's context")
        return lease.check_write(request)

    def check_read(self, request: str) -> None:
        lease = WRITING_FOR.get()
        if lease is not None:
            lease.check_read(request)


@contextlib.contextmanager
def writing_for(lease: ShardLease | None) -> Iterator[None]:
    """Run the block (and the tasks it creates) with its requests fenced by `lease`."""
    token = WRITING_FOR.set(lease)
    try:
        yield
    finally:
        WRITING_FOR.reset(token)
