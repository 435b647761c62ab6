"""The ledger's checks on made-up audit records: each finds what it is there to find.

The shards tests pass when the ledger finds nothing, so these show that it would find a
double writer, a write outside a tenure, a Lease taken before expiry and a shard left
without a holder (no control plane: requests written out by hand).
"""

from __future__ import annotations

from audit import Request
from contract import assign, at_rest, member_lease_name, moved, shard_lease_name, shard_of
from ledger import Ledger

GROUP = "g"
SHARDS = 4
WHO = {"10.0.0.1": "a", "10.0.0.2": "b"}
SOURCE = {v: k for k, v in WHO.items()}
KEY = "ns/svc"
SHARD = shard_of("ns", "svc", SHARDS)


def lease(at: float, who: str, holder: str, shard: int = SHARD) -> Request:
    return Request(at, SOURCE[who], "update", "Lease", "default", shard_lease_name(GROUP, shard), "", 200, str(int(at * 10)), holder=holder)  # fmt: skip


def write(at: float, who: str, code: int = 200, kind: str = "TrafficMap") -> Request:
    if kind == "TrafficMap":
        return Request(at, SOURCE[who], "update", kind, "ns", "svc", "", code, "1")
    return Request(at, SOURCE[who], "update", kind, "ns", "svc-global", "", code, "1", owner=KEY)


def ledger(*requests: Request) -> Ledger:
    ordered = sorted(requests, key=lambda r: r.at)
    return Ledger(ordered, group=GROUP, shards=SHARDS, identities=WHO, lease_duration=8.0)


#: a holds the shard from 0 (renewing until 2), b takes it once it expired (at 11)
HANDOVER = (lease(0, "a", "a"), lease(1, "a", "a"), lease(2, "a", "a"), lease(11, "b", "b"))


def test_a_takeover_after_expiry_with_each_write_in_its_writers_tenure_is_clean() -> None:
    found = ledger(*HANDOVER, write(1.5, "a"), write(12, "b"), write(13, "b", kind="HTTPRoute"))
    assert found.outside_tenure == []
    assert found.overlaps() == []
    assert found.holder_jumps() == []
    assert found.handover_gaps() == [12 - 1.5]
    assert [(s, a, b) for s, a, b in found.unowned(0, 12) if s == SHARD] == [(SHARD, 10, 11)]


def test_a_write_after_the_takeover_is_outside_its_writers_tenure_and_overlaps() -> None:
    found = ledger(*HANDOVER, write(1.5, "a"), write(12, "b"), write(12.5, "a"), write(13, "b"))
    assert len(found.outside_tenure) == 1 and "by a" in found.outside_tenure[0]
    assert len(found.overlaps()) == 1


def test_a_published_object_is_its_services_key_and_a_refused_write_counts_for_nothing() -> None:
    found = ledger(*HANDOVER, write(12.5, "a", code=409), write(12.6, "a", kind="HTTPRoute"))
    assert len(found.outside_tenure) == 1 and "HTTPRoute" in found.outside_tenure[0]


def test_a_lease_taken_before_the_holders_renewal_expired_is_a_jump() -> None:
    assert ledger(lease(0, "a", "a"), lease(5, "b", "b")).holder_jumps() != []
    released = ledger(lease(0, "a", "a"), lease(1, "a", ""), lease(2, "b", "b"))
    assert released.holder_jumps() == []
    assert [x for x in released.unowned(0, 3) if x[0] == SHARD] == [(SHARD, 1, 2)]


def test_the_contract_moves_one_nth_of_the_shards_and_only_to_or_from_the_changed_member() -> None:
    three = assign(16, ["a", "b", "c"])
    assert sorted(three) == list(range(16))
    assert sorted(list(three.values()).count(m) for m in "abc") == [5, 5, 6]
    four = assign(16, "abcd", three)
    assert len(moved(three, four)) == 4 and {four[s] for s in moved(three, four)} == {"d"}
    assert moved(four, assign(16, "abc", four)) == {s for s, m in four.items() if m == "d"}
    assert at_rest(16, "abcd", four) and not at_rest(16, "abcd", three)
    assert member_lease_name(GROUP, "a").startswith("g-member-")
