"""Sharding's pure part: a key's shard, a shard's member, the Lease names."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ome_routing.core.shards import (
    assign,
    member_lease_name,
    shard_lease_name,
    shard_of,
)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
member_sets = st.lists(names, min_size=1, max_size=8, unique=True)
shard_counts = st.integers(min_value=1, max_value=128)


# --- shard_of ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "name", "shards", "expected"),
    [
        ("default", "chat", 64, 47),
        ("team-a", "llama-3", 64, 21),
        ("default", "chat", 1024, 751),
        ("x", "y", 7, 3),
        ("default", "chat", 1, 0),
    ],
)
def test_a_key_falls_in_the_same_shard_everywhere(
    namespace: str, name: str, shards: int, expected: int
) -> None:
    """sha256's first 8 bytes, big-endian, mod shards: the same on every replica and version."""
    assert shard_of(namespace, name, shards) == expected


@given(names, names, shard_counts)
def test_a_key_falls_in_a_shard_of_the_range(namespace: str, name: str, shards: int) -> None:
    assert 0 <= shard_of(namespace, name, shards) < shards


def test_namespace_and_name_are_not_run_together() -> None:
    """`a/bc` and `ab/c` are different keys (the slash is part of what is hashed)."""
    assert shard_of("a", "bc", 1024) != shard_of("ab", "c", 1024)


def test_no_shards_is_refused() -> None:
    with pytest.raises(ValueError, match="shards must be at least 1, got 0"):
        shard_of("default", "chat", 0)


# --- assign -----------------------------------------------------------------------------


def test_the_assignment_of_three_replicas_over_eight_shards() -> None:
    assert assign(8, ["replica-0", "replica-1", "replica-2"]) == {
        0: "replica-0",
        1: "replica-0",
        2: "replica-1",
        3: "replica-2",
        4: "replica-1",
        5: "replica-2",
        6: "replica-1",
        7: "replica-2",
    }


def test_no_members_own_nothing() -> None:
    assert assign(8, []) == {}


@given(shard_counts, member_sets)
def test_every_shard_has_one_of_the_members(shards: int, members: list[str]) -> None:
    owners = assign(shards, members)
    assert sorted(owners) == list(range(shards))
    assert set(owners.values()) <= set(members)


@given(shard_counts, member_sets)
def test_no_member_holds_more_than_its_bounded_share(shards: int, members: list[str]) -> None:
    owners = list(assign(shards, members).values())
    cap = math.ceil(shards / len(members))
    assert max(owners.count(member) for member in members) <= cap


@given(shard_counts, member_sets, st.randoms(use_true_random=False))
def test_the_assignment_depends_on_the_set_of_members_only(
    shards: int, members: list[str], rnd: random.Random
) -> None:
    shuffled = members * 2
    rnd.shuffle(shuffled)
    assert assign(shards, shuffled) == assign(shards, members)


def moved(before: dict[int, str], after: dict[int, str]) -> int:
    return sum(before[shard] != after[shard] for shard in before)


# The bounded loads cost some churn over plain rendezvous hashing: when a member's room
# runs out at a different shard than before, the shards after it cascade. Over 64
# shards, 300 random member sets per size, a change between N and N+1 members (1 to 8)
# moved 1.00 to 1.67 times the ideal share S/(N+1) on average and at most 2.38 times
# ceil(S/(N+1)); among the random sets hypothesis draws here, at most 2.5 times it. The
# bounds below: 3 times the share for any one set, and 1.5 times it on average over 100
# sets for the replica counts the chart is sized for (up to 4 -> 5: 1.21 measured).
SHARDS = 64


@given(member_sets.filter(lambda m: "joining" not in m))
def test_a_member_that_joins_takes_about_its_share(members: list[str]) -> None:
    before = assign(SHARDS, members)
    after = assign(SHARDS, [*members, "joining"])
    share = math.ceil(SHARDS / (len(members) + 1))
    assert moved(before, after) <= 3 * share
    # and it takes what the others' room leaves: they hand it over
    assert list(after.values()).count("joining") >= SHARDS - len(members) * share


@given(st.lists(names, min_size=2, max_size=8, unique=True))
def test_a_member_that_leaves_gives_up_about_its_own(members: list[str]) -> None:
    before = assign(SHARDS, members)
    after = assign(SHARDS, members[1:])
    share = math.ceil(SHARDS / len(members))
    # its own shards move, and a bounded number of others with them
    assert moved(before, after) >= list(before.values()).count(members[0])
    assert moved(before, after) <= 3 * share


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_on_average_a_join_or_a_leave_moves_close_to_one_share(count: int) -> None:
    rnd = random.Random(count)
    joins, leaves = [], []
    for _ in range(100):
        members = [f"replica-{rnd.getrandbits(32):08x}" for _ in range(count + 1)]
        small, large = assign(SHARDS, members[:-1]), assign(SHARDS, members)
        joins.append(moved(small, large) / (SHARDS / (count + 1)))
        leaves.append(moved(large, small) / (SHARDS / (count + 1)))
    assert sum(joins) / len(joins) <= 1.5
    assert sum(leaves) / len(leaves) <= 1.5


# --- names ------------------------------------------------------------------------------


def test_lease_names() -> None:
    assert shard_lease_name("ome-routing-controller", 7) == "ome-routing-controller-shard-7"
    assert (
        member_lease_name("ome-routing-controller", "replica-0")
        == "ome-routing-controller-member-26607077dc"
    )


@given(names)
def test_a_member_lease_name_is_a_valid_name_whatever_the_identity(identity: str) -> None:
    name = member_lease_name("ome-routing-controller", identity + "/:_ UPPER")
    assert len(name) == len("ome-routing-controller-member-") + 10
    assert name.removeprefix("ome-routing-controller-member-").isalnum()
