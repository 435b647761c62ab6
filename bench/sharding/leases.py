"""The shard group's Leases, seen from outside the replicas (for `run.py`).

`ShardWatch` keeps each shard's live holder from a watch of the group's shard Leases
(by their labels) and judges every 0.1 s which are live, so a Lease that expires without
an event is seen too; it records the longest any shard went without a live holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.resources.coordination_v1 import Lease

from ome_routing.core.shards import assign

GROUP_LABEL = "routing.ome-routing.io/shard-group"
ROLE_LABEL = "routing.ome-routing.io/shard-role"
SHARD_LABEL = "routing.ome-routing.io/shard"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def shard_number(lease: Any) -> int:
    labels = lease.metadata.labels or {}
    if SHARD_LABEL in labels:
        return int(labels[SHARD_LABEL])
    return int(lease.metadata.name.rsplit("-", 1)[1])


def live_holder(lease: Any, now: datetime) -> str | None:
    """The Lease's holder while its last renewal is younger than its duration, else None."""
    spec = lease.spec
    if spec is None or not spec.holderIdentity or spec.renewTime is None:
        return None
    renewed = spec.renewTime
    if renewed.tzinfo is None:
        renewed = renewed.replace(tzinfo=UTC)
    if (now - renewed).total_seconds() >= (spec.leaseDurationSeconds or 0):
        return None
    return str(spec.holderIdentity)


class ShardWatch:
    """Each shard's live holder, and how long shards went without one (since `reset`)."""

    def __init__(self, client: AsyncClient, namespace: str, group: str, shards: int) -> None:
        self._client = client
        self._namespace = namespace
        self._labels = {GROUP_LABEL: group, ROLE_LABEL: "shard"}
        self.shards = shards
        self._leases: dict[int, Any] = {}
        self.holders: dict[int, str | None] = dict.fromkeys(range(shards))
        #: when (monotonic) each shard's live holder last changed
        self.since: dict[int, float] = {}
        self._unowned_since: dict[int, float] = {}
        self.longest_unowned = 0.0
        self.changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._watch()), asyncio.create_task(self._judge())]

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    def reset(self) -> None:
        self.longest_unowned = 0.0
        now = time.monotonic()
        self._unowned_since = dict.fromkeys(self._unowned_since, now)

    async def _watch(self) -> None:
        while True:
            try:
                listing = self._client.list(Lease, namespace=self._namespace, labels=self._labels)
                leases = {shard_number(lease): lease async for lease in listing}
                self._leases = leases
                async for _kind, lease in self._client.watch(
                    Lease,
                    namespace=self._namespace,
                    labels=self._labels,
                    resource_version=listing.resourceVersion,
                ):
                    self._leases[shard_number(lease)] = lease
            except (ApiError, httpx2.HTTPError) as err:
                log(f"watching the shard Leases: {err}; listing them again")
                await asyncio.sleep(0.5)

    async def _judge(self) -> None:
        while True:
            now, wall = time.monotonic(), datetime.now(UTC)
            holders: dict[int, str | None] = {
                shard: live_holder(self._leases[shard], wall) if shard in self._leases else None
                for shard in range(self.shards)
            }
            for shard, holder in holders.items():
                if holder is None:
                    self._unowned_since.setdefault(shard, now)
                elif shard in self._unowned_since:
                    started = self._unowned_since.pop(shard)
                    self.longest_unowned = max(self.longest_unowned, now - started)
            for started in self._unowned_since.values():
                self.longest_unowned = max(self.longest_unowned, now - started)
            if holders != self.holders:
                for shard, holder in holders.items():
                    if holder != self.holders.get(shard):
                        self.since[shard] = now
                self.holders = holders
                self.changed.set()
            await asyncio.sleep(0.1)

    async def next_change(self, timeout: float) -> None:
        """Return at the next change of a holder, or after `timeout` seconds."""
        self.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout)

    def at_rest(self, members: Sequence[str]) -> bool:
        """Whether every shard is held by one of `members` and `assign`, given these
        holders, moves none (no hand-over to come)."""
        holders = dict(self.holders)
        return holders == dict(assign(self.shards, members, holders))

    async def settle(self, members: Sequence[str], limit: float, quiet: float) -> bool:
        """Wait until the shards are at rest over `members` (True); past `limit` seconds,
        until every shard is held by one of `members` and no holder has changed for
        `quiet` seconds (False)."""
        started = time.monotonic()
        while not self.at_rest(members):
            if time.monotonic() - started > limit:
                log(f"the shards are not at rest after {limit:.0f}s: {self.holders}")
                break
            await self.next_change(1.0)
        else:
            return True
        while True:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), quiet)
            except TimeoutError:
                if all(holder in members for holder in self.holders.values()):
                    return False
            if time.monotonic() - started > 4 * limit:
                raise SystemExit(f"the shards are not all held by {list(members)}: {self.holders}")


async def lease_writes(client: AsyncClient, namespace: str, seconds: float) -> int:
    """Lease changes in `namespace` over the next `seconds` (a watch from now)."""
    listing = client.list(Lease, namespace=namespace)
    async for _ in listing:
        pass
    count = 0

    async def watch() -> None:
        nonlocal count
        async for _kind, _lease in client.watch(
            Lease, namespace=namespace, resource_version=listing.resourceVersion
        ):
            count += 1

    task = asyncio.create_task(watch())
    await asyncio.sleep(seconds)
    task.cancel()
    return count
