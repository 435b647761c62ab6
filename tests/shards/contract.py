"""The sharding contract, written out again here so that the tests check it, not echo it.

The functions the replicas agree on (`ome_routing.core.shards`) as the project's decision
states them: which shard a key is in, which live member a shard goes to, and the Leases'
names and labels. A test compares what the replicas do with what these say.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

GROUP_LABEL = "routing.ome-routing.io/shard-group"
ROLE_LABEL = "routing.ome-routing.io/shard-role"
SHARD_LABEL = "routing.ome-routing.io/shard"
#: on a shard Lease its holder took as a fallback: it hands the shard over later, so a
#: shard held so is not at rest
FALLBACK_ANNOTATION = "routing.ome-routing.io/shard-fallback"


def _score(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def shard_of(namespace: str, name: str, shards: int) -> int:
    return _score(f"{namespace}/{name}") % shards


def assign(
    shards: int, members: Iterable[str], holders: Mapping[int, str | None] | None = None
) -> dict[int, str]:
    """The sticky balanced assignment, from the shards' live holders (none: a cold start).

    Shares: S // N each, and one more for S % N members: those that hold more than
    S // N now come first, then the rest, each group in the order of the first 8 bytes of
    sha256 of the member's name, descending (then the name). A member keeps its share of
    what it holds, the shards whose score (`shard/member`) is highest; every other shard,
    in shard order, goes to the highest-scoring member with part of its share left."""
    live = sorted(set(members))
    if not live:
        return {}
    base, extra = divmod(shards, len(live))
    current = holders or {}
    mine = {m: [s for s in range(shards) if current.get(s) == m] for m in live}
    heavy = [m for m in live if len(mine[m]) > base]
    light = [m for m in live if len(mine[m]) <= base]
    larger = set((_by_hash(heavy) + _by_hash(light))[:extra])
    share = {m: base + (m in larger) for m in live}
    owners: dict[int, str] = {}
    for m in live:
        best = sorted(mine[m], key=lambda s: (_score(f"{s}/{m}"), -s), reverse=True)
        owners.update(dict.fromkeys(best[: share[m]], m))
    left = {m: share[m] - sum(1 for o in owners.values() if o == m) for m in live}
    for shard in range(shards):
        if shard in owners:
            continue
        ranked = sorted(live, key=lambda m: (-_score(f"{shard}/{m}"), m))
        owner = next(m for m in ranked if left[m] > 0)
        owners[shard] = owner
        left[owner] -= 1
    return dict(sorted(owners.items()))


def _by_hash(members: list[str]) -> list[str]:
    return sorted(members, key=lambda m: (-_score(m), m))


def at_rest(shards: int, members: Iterable[str], holders: Mapping[int, str | None]) -> bool:
    """Whether the holders are where the members leave them: every shard held by a
    member, and the assignment from these holders moves none."""
    live = set(members)
    held = {s: holders.get(s) for s in range(shards)}
    return all(h in live for h in held.values()) and assign(shards, live, held) == held


def shard_lease_name(group: str, shard: int) -> str:
    return f"{group}-shard-{shard}"


def member_lease_name(group: str, identity: str) -> str:
    return f"{group}-member-{hashlib.sha256(identity.encode()).hexdigest()[:10]}"


def moved(before: dict[int, str], after: dict[int, str]) -> set[int]:
    """The shards whose owner differs between two assignments."""
    return {s for s in after if before.get(s) != after[s]}
