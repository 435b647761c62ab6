"""The sharding contract, written out again here so that the tests check it, not echo it.

The functions the replicas agree on (`ome_routing.core.shards`) as the project's decision
states them: which shard a key is in, which live member a shard goes to, and the Leases'
names and labels. A test compares what the replicas do with what these say.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

GROUP_LABEL = "routing.ome-routing.io/shard-group"
ROLE_LABEL = "routing.ome-routing.io/shard-role"
SHARD_LABEL = "routing.ome-routing.io/shard"


def _score(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def shard_of(namespace: str, name: str, shards: int) -> int:
    return _score(f"{namespace}/{name}") % shards


def assign(shards: int, members: Iterable[str]) -> dict[int, str]:
    """Rendezvous hashing with bounded loads: shards in order, each to the highest-scoring
    member that has room (at most ceil(shards / members) each)."""
    live = sorted(set(members))
    if not live:
        return {}
    room = math.ceil(shards / len(live))
    load = dict.fromkeys(live, 0)
    owners: dict[int, str] = {}
    for shard in range(shards):
        ranked = sorted(live, key=lambda m: _score(f"{shard}/{m}"), reverse=True)
        owner = next(m for m in ranked if load[m] < room)
        owners[shard] = owner
        load[owner] += 1
    return owners


def shard_lease_name(group: str, shard: int) -> str:
    return f"{group}-shard-{shard}"


def member_lease_name(group: str, identity: str) -> str:
    return f"{group}-member-{hashlib.sha256(identity.encode()).hexdigest()[:10]}"


def moved(before: dict[int, str], after: dict[int, str]) -> set[int]:
    """The shards whose owner differs between two assignments."""
    return {s for s in after if before.get(s) != after[s]}
