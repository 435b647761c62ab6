"""Sharding's pure part: a key's shard, a shard's member, the Lease names."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ome_routing.core.shards import (
    assign,
    member_lease_name,
    shard_lease_name,
    shard_of,
)

#: no deadline: a case's time is not what these check, and a loaded machine (CI runs its
#: lanes side by side) can take longer than hypothesis's default 200 ms for one
NO_DEADLINE = settings(deadline=None)

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


@NO_DEADLINE
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
    """A cold start (no holders): 2, 3 and 3 shards, by score within each member's room."""
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
    assert assign(8, [], {0: "replica-0"}) == {}


def test_held_shards_stay_where_the_balance_allows() -> None:
    """replica-0 holds all eight: it keeps the three it scores highest for, and the two
    others get the rest, not a cold start's choice."""
    held = dict.fromkeys(range(8), "replica-0")
    owners = assign(8, ["replica-0", "replica-1", "replica-2"], held)
    assert loads(owners, ["replica-0", "replica-1", "replica-2"]) == [3, 3, 2]
    assert owners == {
        0: "replica-0",
        1: "replica-2",
        2: "replica-0",
        3: "replica-2",
        4: "replica-1",
        5: "replica-0",
        6: "replica-1",
        7: "replica-1",
    }


def loads(owners: dict[int, str], members: list[str]) -> list[int]:
    return [list(owners.values()).count(member) for member in members]


def moved(before: Mapping[int, str | None], after: dict[int, str]) -> set[int]:
    return {shard for shard in after if before.get(shard) != after[shard]}


#: holders as a replica may list them: members, names that are no member (dead or made
#: up), no holder, missing shards, shards outside the range
def holders_of(members: list[str], shards: int) -> st.SearchStrategy[dict[int, str | None]]:
    who = st.one_of(st.sampled_from(members), names, st.none())
    return st.dictionaries(st.integers(min_value=-2, max_value=shards + 2), who)


@st.composite
def situations(draw: st.DrawFn) -> tuple[int, list[str], dict[int, str | None]]:
    shards = draw(shard_counts)
    members = draw(member_sets)
    holders = draw(
        st.one_of(
            holders_of(members, shards),
            # a member over its cap: one member holds everything or nearly
            st.builds(lambda m: dict.fromkeys(range(shards), m), st.sampled_from(members)),
        )
    )
    return shards, members, holders


@NO_DEADLINE
@given(situations())
def test_every_shard_has_one_of_the_members_whatever_the_holders(
    situation: tuple[int, list[str], dict[int, str | None]],
) -> None:
    shards, members, holders = situation
    owners = assign(shards, members, holders)
    assert sorted(owners) == list(range(shards))
    assert set(owners.values()) <= set(members)


@NO_DEADLINE
@given(situations())
def test_each_member_holds_the_floor_or_the_ceiling_of_its_share(
    situation: tuple[int, list[str], dict[int, str | None]],
) -> None:
    shards, members, holders = situation
    counts = loads(assign(shards, members, holders), members)
    assert min(counts) >= shards // len(members)
    assert max(counts) <= math.ceil(shards / len(members))


@NO_DEADLINE
@given(situations(), st.randoms(use_true_random=False))
def test_the_assignment_depends_on_the_sets_only(
    situation: tuple[int, list[str], dict[int, str | None]], rnd: random.Random
) -> None:
    shards, members, holders = situation
    shuffled = members * 2
    rnd.shuffle(shuffled)
    reordered = dict(rnd.sample(list(holders.items()), len(holders)))
    assert assign(shards, shuffled, reordered) == assign(shards, members, holders)


@NO_DEADLINE
@given(situations())
def test_its_answer_is_a_fixed_point_at_once(
    situation: tuple[int, list[str], dict[int, str | None]],
) -> None:
    """From any holders, one step reaches the answer, and the answer asks for no move."""
    shards, members, holders = situation
    answer = assign(shards, members, holders)
    assert assign(shards, members, answer) == answer
    assert assign(shards, members, {s: m for s, m in answer.items()}) == answer


@NO_DEADLINE
@given(situations(), st.data())
def test_a_handover_half_done_keeps_the_same_target(
    situation: tuple[int, list[str], dict[int, str | None]], data: st.DataObject
) -> None:
    """On the way to the answer each shard that moves is released (no holder) and then
    taken by its new member: with any of them in either state, the answer is the same,
    so a released shard goes to the member the balancing chose, and none bounces."""
    shards, members, holders = situation
    answer = assign(shards, members, holders)
    midway: dict[int, str | None] = {s: holders.get(s) for s in range(shards)}
    for shard in sorted(moved(holders, answer)):
        midway[shard] = data.draw(st.sampled_from([holders.get(shard), None, answer[shard]]))
    assert assign(shards, members, midway) == answer


@st.composite
def at_rest(draw: st.DrawFn, min_members: int = 1) -> tuple[int, list[str], dict[int, str]]:
    """Members holding a fixed point of `assign`, reached from any holders."""
    shards = draw(shard_counts)
    members = draw(st.lists(names, min_size=min_members, max_size=8, unique=True))
    holders = draw(holders_of(members, shards))
    return shards, members, assign(shards, members, holders)


@NO_DEADLINE
@given(at_rest(min_members=2), st.data())
def test_members_that_leave_move_exactly_their_own_shards(
    rest: tuple[int, list[str], dict[int, str]], data: st.DataObject
) -> None:
    shards, members, holders = rest
    leaving = data.draw(st.lists(st.sampled_from(members), min_size=1, max_size=len(members) - 1))
    left = [m for m in members if m not in leaving]
    after = assign(shards, left, holders)
    assert moved(holders, after) == {s for s, m in holders.items() if m in leaving}
    assert set(after.values()) <= set(left)


@NO_DEADLINE
@given(at_rest(), names)
def test_a_member_that_joins_takes_at_most_its_share_and_nothing_else_moves(
    rest: tuple[int, list[str], dict[int, str]], joining: str
) -> None:
    shards, members, holders = rest
    assume(joining not in members)
    after = assign(shards, [*members, joining], holders)
    taken = moved(holders, after)
    assert {after[s] for s in taken} <= {joining}
    assert len(taken) == list(after.values()).count(joining)
    assert shards // (len(members) + 1) <= len(taken) <= math.ceil(shards / (len(members) + 1))


def test_a_cold_start_balances_as_evenly_as_the_shards_allow() -> None:
    owners = assign(64, ["replica-a", "replica-b", "replica-c"])
    assert sorted(loads(owners, ["replica-a", "replica-b", "replica-c"])) == [21, 21, 22]


# --- names ------------------------------------------------------------------------------


def test_lease_names() -> None:
    assert shard_lease_name("ome-routing-controller", 7) == "ome-routing-controller-shard-7"
    assert (
        member_lease_name("ome-routing-controller", "replica-0")
        == "ome-routing-controller-member-26607077dc"
    )


@NO_DEADLINE
@given(names)
def test_a_member_lease_name_is_a_valid_name_whatever_the_identity(identity: str) -> None:
    name = member_lease_name("ome-routing-controller", identity + "/:_ UPPER")
    assert len(name) == len("ome-routing-controller-member-") + 10
    assert name.removeprefix("ome-routing-controller-member-").isalnum()
