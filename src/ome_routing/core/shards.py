"""Sharding's pure part (ours): which virtual shard a routed service falls in, which
member a shard belongs to, and the names of the Leases that say so.

- `shard_of`: a key's shard, stable across processes, versions and platforms (sha256,
  not Python's salted `hash`).
- `assign`: rendezvous (highest random weight) hashing with bounded loads: every shard
  gets exactly one member, no member more than ceil(shards / members), the result depends
  only on the set of members (not their order), and a change of one member moves about
  the share of the member that came or went.
- `shard_lease_name`, `member_lease_name`: the Lease names of a shard group.

No I/O and no clock: `kube.sharding` holds the Leases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


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


def assign(shards: int, members: Iterable[str]) -> dict[int, str]:
    """Each shard (0..shards-1) to one member: rendezvous hashing with bounded loads.

    Shards are visited in order 0..shards-1; each goes to the highest-scoring member
    (`score`) that holds fewer than ceil(shards / len(members)) shards so far; ties of
    score (2^-64 apart) go to the smaller name. Properties:

    - every shard has exactly one member (none when there are no members);
    - no member holds more than ceil(shards / len(members));
    - the result depends on the set of members only: order and repeats do not matter;
    - adding or removing one member moves about shards / len(members) shards: a shard
      changes hands only when the member that came scores highest for it, or when the
      member that went held it, or (the bound's price) when a member's room runs out
      earlier or later than before.
    """
    names = sorted(set(members))
    if not names:
        return {}
    cap = -(-shards // len(names))
    load = dict.fromkeys(names, 0)
    owners: dict[int, str] = {}
    for shard in range(shards):
        ranked = sorted(names, key=lambda member: (-score(shard, member), member))
        owner = next(member for member in ranked if load[member] < cap)
        load[owner] += 1
        owners[shard] = owner
    return owners


def shard_lease_name(group: str, shard: int) -> str:
    """The name of a shard's Lease: `<group>-shard-<n>`."""
    return f"{group}-shard-{shard}"


def member_lease_name(group: str, identity: str) -> str:
    """The name of a replica's member Lease: `<group>-member-<10 hex of sha256(identity)>`
    (an identity, often a pod name with a UID, may be too long or hold characters a
    Lease name may not)."""
    return f"{group}-member-{hashlib.sha256(identity.encode()).hexdigest()[:10]}"
