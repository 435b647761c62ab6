"""Sharding's pure part (ours): which virtual shard a routed service falls in, which
member a shard belongs to, and the names of the Leases that say so.

- `shard_of`: a key's shard, stable across processes, versions and platforms (sha256,
  not Python's salted `hash`).
- `assign`: sticky balanced assignment: a function of the live members and of the
  shards' current live holders. Every shard gets exactly one member, each member
  floor(shards / members) or ceil(shards / members) of them, a shard keeps its holder
  whenever the balance allows, and the result does not depend on the order of its inputs.
  A member that leaves moves only the shards it held; one that joins takes its share and
  nothing else moves; once the holders are the answer, the answer stays (see `assign`).
- `shard_lease_name`, `member_lease_name`: the Lease names of a shard group.

No I/O and no clock: `kube.sharding` holds the Leases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping


def _hash64(text: str) -> int:
    """The first 8 bytes of sha256(text), big-endian."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def shard_of(namespace: str, name: str, shards: int) -> int:
    """The shard (0..shards-1) of the routed service `namespace/name`.

    Stable: the first 8 bytes of sha256 of `namespace/name`, big-endian, modulo `shards`,
    so every replica, of every version, puts a key in the same shard.
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    return _hash64(f"{namespace}/{name}") % shards


def score(shard: int, member: str) -> int:
    """How much `member` wants `shard`: the first 8 bytes of sha256 of `shard/member`."""
    return _hash64(f"{shard}/{member}")


def _rank(member: str) -> tuple[int, str]:
    """A member's fixed place among its peers (its hash, then its name): who gets a
    shard more than the others when nothing else says."""
    return (-_hash64(member), member)


def assign(
    shards: int,
    members: Iterable[str],
    holders: Mapping[int, str | None] | None = None,
) -> dict[int, str]:
    """Each shard (0..shards-1) to one member, keeping the shards' `holders` where the
    balance allows.

    `holders` gives a shard's current live holder (a shard missing, held by no one, or
    held by a name that is not a member is free); without it (a cold start) every shard
    is free. With N members, S shards, base = S // N and extra = S % N:

    1. **Quotas.** `extra` members get base + 1 shards, the others base: first the members
       holding more than base (by `_rank`), then the others (by `_rank`).
    2. **Keep.** Each member keeps as many of the shards it holds as its quota allows,
       those it scores highest for (`score`); the rest of its shards are free.
    3. **Free shards**, in order 0..S-1, each to the highest-scoring member that has
       room left under its quota (ties of score, 2^-64 apart, to the smaller name).

    Properties (tests/unit/test_shards.py proves them):

    - every shard has exactly one member (none when there are no members), and each
      member holds base or base + 1;
    - the result depends on the sets only: order and repeats of `members` do not matter;
    - a fixed point: `assign(S, M, assign(S, M, h)) == assign(S, M, h)` for any `h`, so
      replicas that hold what it says are never told to move;
    - a handover does not bounce: on the way from `h` to its answer, with any of the
      shards that move released (no holder) or already taken by their new member, the
      answer is the same (the quota of step 1 depends only on who holds more than base,
      which a handover does not change for a member with the larger quota; a member's
      room and step 3's order give a released shard the member they gave it before);
    - from a fixed point, a member that leaves moves exactly its own shards, each to a
      survivor; a member that joins takes its quota (at most ceil(S / (N + 1))) and no
      other shard moves.
    """
    names = sorted(set(members))
    if not names:
        return {}
    base, extra = divmod(shards, len(names))
    held: dict[str, list[int]] = {member: [] for member in names}
    for shard in range(shards):
        holder = holders.get(shard) if holders is not None else None
        if holder is not None and holder in held:
            held[holder].append(shard)
    order = sorted(names, key=lambda member: (len(held[member]) <= base, _rank(member)))
    quota = {member: base + (place < extra) for place, member in enumerate(order)}
    owners: dict[int, str] = {}
    room: dict[str, int] = {}
    for member in names:
        kept = sorted(held[member], key=lambda shard: (-score(shard, member), shard))
        for shard in kept[: quota[member]]:
            owners[shard] = member
        room[member] = quota[member] - min(len(kept), quota[member])
    for shard in range(shards):
        if shard in owners:
            continue
        ranked = sorted(names, key=lambda member: (-score(shard, member), member))
        owner = next(member for member in ranked if room[member] > 0)
        room[owner] -= 1
        owners[shard] = owner
    return dict(sorted(owners.items()))


def shard_lease_name(group: str, shard: int) -> str:
    """The name of a shard's Lease: `<group>-shard-<n>`."""
    return f"{group}-shard-{shard}"


def member_lease_name(group: str, identity: str) -> str:
    """The name of a replica's member Lease: `<group>-member-<10 hex of sha256(identity)>`
    (an identity, often a pod name with a UID, may be too long or hold characters a
    Lease name may not)."""
    return f"{group}-member-{hashlib.sha256(identity.encode()).hexdigest()[:10]}"
