"""A reconciler's side of sharding: which keys it may work on now, and its work per shard.

With `--sharding` the routing controller and the publisher each take a `ShardWork` over
the replica's `ShardSet` (`kube.sharding`). A key is worked on only while the replica
holds a live tenure of its shard (`tenure`); the work runs inside `working`, which sets
that tenure for every request the work makes (`writing_for`: the replica's one
`FencedClient` asks it) and counts the work underway per shard.

When a shard is acquired, every cached key of it is handed to the reconciler once
(coalesced: the acquisitions of one turn of the event loop cost one pass over the keys),
and counts as worked on under its tenure from then: the reconciler may keep state for it
at once (the routing controller starts its homes' polls before its first pass).
When a tenure ends, the shard is let go at once (no new work on it starts), the work
underway on it is awaited for at most `grace` seconds (on a handover the gate is still
open, so those reconciles finish their writes), and then every key worked on under it is
dropped by the reconciler (`drop`): its homes, probes and per-key state go, nothing of it
is written again.

It must not write anything itself, nor decide what a key's map holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Protocol

from ome_routing.core.shards import shard_of
from ome_routing.kube.fencing import NotLeader
from ome_routing.kube.sharding import ShardLease, writing_for

log = logging.getLogger(__name__)

#: a routed service, by namespace and name (the reconcilers' key)
Key = tuple[str, str]


class ShardOwner(Protocol):
    """What the reconcilers need of a `ShardSet`."""

    shards: int

    def tenure_for(self, namespace: str, name: str) -> ShardLease | None: ...

    def subscribe(
        self,
        on_acquired: Callable[[ShardLease], None],
        on_lost: Callable[[int], Awaitable[None]],
    ) -> None: ...


class ShardWork:
    """One reconciler's work under a `ShardOwner`; see the module docstring. One loop."""

    def __init__(
        self,
        owner: ShardOwner,
        *,
        keys: Callable[[], Iterable[Key]],
        enqueue: Callable[[Key], None],
        drop: Callable[[Key], None],
        grace: float,
        name: str,
    ) -> None:
        self.owner = owner
        self._keys = keys
        self._enqueue = enqueue
        self._drop = drop
        self._grace = grace
        self._name = name
        #: shards whose tenure is ending here: no new work starts on them
        self._leaving: set[int] = set()
        #: per shard, the keys worked on under its tenure (dropped when it ends)
        self._worked: dict[int, set[Key]] = {}
        #: per shard, the work underway, and an event set while there is none
        self._running: dict[int, int] = {}
        self._idle: dict[int, asyncio.Event] = {}
        #: shards acquired whose keys are still to be handed over (one pass a turn)
        self._arrived: set[int] = set()
        self._pass: asyncio.Handle | None = None
        owner.subscribe(self._acquired, self._lost)

    # --- asked by the reconciler ---------------------------------------------------------

    def tenure(self, key: Key) -> ShardLease | None:
        """The live tenure `key` may be worked on under now, or None: leave it alone."""
        lease = self.owner.tenure_for(key[0], key[1])
        if lease is None or lease.ended or lease.shard in self._leaving:
            return None
        return lease

    @contextlib.contextmanager
    def working(self, key: Key, lease: ShardLease) -> Iterator[None]:
        """Around one reconcile of `key`: its requests are fenced by `lease` (set before the
        reconcile's task is created, which copies it), and it counts as underway."""
        shard = lease.shard
        self._worked.setdefault(shard, set()).add(key)
        self._running[shard] = self._running.get(shard, 0) + 1
        idle = self._idle.get(shard)
        if idle is not None:
            idle.clear()
        try:
            with writing_for(lease):
                yield
        finally:
            self._running[shard] -= 1
            if not self._running[shard]:
                del self._running[shard]
                idle = self._idle.pop(shard, None)
                if idle is not None:
                    idle.set()

    def let_go(self, key: Key, lease: ShardLease, err: BaseException) -> bool:
        """Whether `err` is the refusal of a tenure that has ended (or is ending): the key is
        then dropped quietly, not reported as a failure."""
        if not isinstance(err, NotLeader):
            return False
        if lease.ended or lease.shard in self._leaving or self.tenure(key) is not lease:
            log.debug(
                "shard no longer held: key dropped",
                extra={
                    "reconciler": self._name,
                    "key": f"{key[0]}/{key[1]}",
                    "shard": lease.shard,
                    "error": str(err),
                },
            )
            return True
        return False

    def forget(self, key: Key, lease: ShardLease) -> None:
        """`key` is gone from the caches: nothing of it is left to drop later."""
        worked = self._worked.get(lease.shard)
        if worked is not None:
            worked.discard(key)

    # --- told by the owner -----------------------------------------------------------------

    def _acquired(self, lease: ShardLease) -> None:
        self._leaving.discard(lease.shard)
        self._arrived.add(lease.shard)
        if self._pass is None:
            self._pass = asyncio.get_running_loop().call_soon(self._hand_over)

    def _hand_over(self) -> None:
        self._pass = None
        arrived, self._arrived = self._arrived, set()
        shards = self.owner.shards
        for key in list(self._keys()):
            shard = shard_of(key[0], key[1], shards)
            if shard in arrived:
                self._worked.setdefault(shard, set()).add(key)
                self._enqueue(key)

    async def _lost(self, shard: int) -> None:
        self._leaving.add(shard)
        self._arrived.discard(shard)
        try:
            if self._running.get(shard):
                idle = self._idle.setdefault(shard, asyncio.Event())
                # a little inside the grace, so the owner does not give up on this first
                async with asyncio.timeout(self._grace * 0.9):  # not wait_for (3.11)
                    await idle.wait()
        except TimeoutError:
            log.warning(
                "shard let go with work underway",
                extra={"reconciler": self._name, "shard": shard, "grace": self._grace},
            )
        finally:
            for key in self._worked.pop(shard, ()):
                self._drop(key)
