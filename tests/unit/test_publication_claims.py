"""OME's journal checks before a map claims its targets, and the index that answers them."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ome_routing.core.publication_claims import (
    ClaimIndex,
    ClaimProblem,
    InvalidClaims,
    collision_problem,
    has_journal_of,
    legacy_lifecycle_problem,
    normalize_claims,
    own_journal,
)
from ome_routing.core.publication_status import Reason

ME = "gatewayapi"


def tmap(key: str, uid: str, publisher: str | None = ME, claims: list[str] | None = None) -> Any:
    namespace, name = key.split("/")
    obj: dict[str, Any] = {"metadata": {"namespace": namespace, "name": name, "uid": uid}}
    if publisher is not None:
        journal: dict[str, Any] = {"publisherName": publisher}
        if claims:
            journal["claimedTargets"] = claims
        obj["status"] = {"publisher": journal}
    return obj


def route(key: str) -> str:
    return f"v1:httproute:{key}"


class TestNormalize:
    def test_sorted(self) -> None:
        assert normalize_claims(["b", "a"]) == ["a", "b"]

    @pytest.mark.parametrize(
        ("claims", "message"),
        [
            (["x"] * 129, "publisher plan has 129 targets, maximum is 128"),
            (["a", ""], "publisher target must not be empty"),
            (["é" * 257], f'publisher target "{"é" * 257}" has 514 bytes, maximum is 512'),
            (["b", "a", "b"], 'publisher plan contains duplicate target "b"'),
        ],
    )
    def test_omes_rules(self, claims: list[str], message: str) -> None:
        with pytest.raises(InvalidClaims) as raised:
            normalize_claims(claims)
        assert str(raised.value) == message


class TestOwnJournal:
    def test_no_journal_claims_nothing(self) -> None:
        assert own_journal({}, ME) == ([], None)
        assert not has_journal_of({}, ME)

    def test_our_journal(self) -> None:
        status = tmap("ns/a", "1", ME, [route("ns/b"), route("ns/a")])["status"]
        assert own_journal(status, ME) == ([route("ns/a"), route("ns/b")], None)
        assert has_journal_of(status, ME)

    def test_claims_of_another_publisher_mean_the_publisher_changed(self) -> None:
        status = tmap("ns/a", "1", "istio", [route("ns/a")])["status"]
        assert own_journal(status, ME) == (
            [],
            ClaimProblem(
                Reason.PUBLISHER_CHANGED,
                'TrafficMap publisher changed while claims remain: from "istio" to "gatewayapi"',
            ),
        )

    def test_a_retained_plan_of_another_publisher_too(self) -> None:
        status = {"publisher": {"publisherName": "istio", "lastPositive": {}}}
        assert own_journal(status, ME)[1] is not None

    def test_another_publishers_empty_journal_is_taken_over(self) -> None:
        status = tmap("ns/a", "1", "istio")["status"]
        assert own_journal(status, ME) == ([], None)
        assert not has_journal_of(status, ME)  # so the legacy scan still applies

    def test_an_invalid_journal_is_a_rejected_claim(self) -> None:
        status = {"publisher": {"publisherName": ME, "claimedTargets": ["a", "a"]}}
        assert own_journal(status, ME)[1] == ClaimProblem(
            Reason.CLAIM_REJECTED,
            'invalid publisher journal: publisher plan contains duplicate target "a"',
        )


class TestCollisions:
    def test_a_target_claimed_by_another_map(self) -> None:
        maps = [tmap("ns/a", "1", ME, [route("ns/a")]), tmap("ns/b", "2", ME, [route("ns/a")])]
        assert collision_problem("1", [route("ns/a")], maps, ME) == ClaimProblem(
            Reason.CLAIM_REJECTED,
            'publisher target "v1:httproute:ns/a" is already claimed by TrafficMap ns/b',
        )

    def test_the_map_itself_and_other_targets_are_no_collision(self) -> None:
        maps = [tmap("ns/a", "1", ME, [route("ns/a")]), tmap("ns/b", "2", ME, [route("ns/b")])]
        assert collision_problem("1", [route("ns/a")], maps, ME) is None

    def test_another_map_with_claims_of_another_publisher(self) -> None:
        maps = [tmap("ns/z", "9", "istio", [route("ns/z")])]
        assert collision_problem("1", [route("ns/a")], maps, ME) == ClaimProblem(
            Reason.CLAIM_REJECTED,
            'TrafficMap ns/z retains claims for publisher "istio" while publisher "gatewayapi" '
            "is selected",
        )

    def test_another_map_with_an_invalid_journal(self) -> None:
        other = {
            "metadata": {"namespace": "ns", "name": "z", "uid": "9"},
            "status": {"publisher": {"publisherName": ME, "claimedTargets": [""]}},
        }
        assert collision_problem("1", [], [other], ME) == ClaimProblem(
            Reason.CLAIM_REJECTED,
            "TrafficMap ns/z has an invalid publisher journal: publisher target must not be empty",
        )

    def test_the_first_map_in_list_order_is_reported(self) -> None:
        maps = [
            tmap("ns/c", "3", ME, [route("ns/a")]),
            tmap("ns-2/b", "2", "istio", [route("x")]),
        ]
        problem = collision_problem("1", [route("ns/a")], maps, ME)
        assert problem is not None and "ns-2/b" in problem.error  # "ns-2/" < "ns/"

    def test_too_many_claims_in_the_union(self) -> None:
        claims = [route(f"ns/r{i}") for i in range(129)]
        assert collision_problem("1", claims, [], ME) == ClaimProblem(
            Reason.CLAIM_REJECTED, "publisher claim union has 129 targets, maximum is 128"
        )


def test_the_legacy_scan_counts_services_with_the_legacy_finalizer() -> None:
    isvcs = [
        {"metadata": {"finalizers": ["ome.io/placement-endpoint"]}},
        {"metadata": {"finalizers": ["other"]}},
        {"metadata": {"finalizers": ["other", "ome.io/placement-endpoint"]}},
        {"metadata": {}},
    ]
    assert legacy_lifecycle_problem(isvcs) == ClaimProblem(
        Reason.LEGACY_LIFECYCLE_ACTIVE,
        "2 InferenceService(s) retain the legacy endpoint publisher finalizer; complete their "
        "cleanup before publishing TrafficMaps",
    )
    assert legacy_lifecycle_problem(isvcs[1:2]) is None


class TestIndex:
    def test_follows_updates_and_deletes(self) -> None:
        index = ClaimIndex(ME)
        index.observe_map("ns/b", tmap("ns/b", "2", ME, [route("ns/a")]))
        assert index.collision("1", [route("ns/a")]) is not None
        index.observe_map("ns/b", tmap("ns/b", "2", ME, [route("ns/b")]))
        assert index.collision("1", [route("ns/a")]) is None
        index.observe_map("ns/z", tmap("ns/z", "9", "istio", [route("ns/z")]))
        assert index.collision("1", [route("ns/a")]) is not None
        index.observe_map("ns/z", None)
        assert index.collision("1", [route("ns/a")]) is None

    def test_legacy_services_come_and_go(self) -> None:
        index = ClaimIndex(ME)
        legacy = {"metadata": {"finalizers": ["ome.io/placement-endpoint"]}}
        index.observe_service("ns/a", legacy)
        index.observe_service("ns/b", legacy)
        problem = index.legacy()
        assert problem is not None and problem.error.startswith("2 InferenceService(s)")
        index.observe_service("ns/a", {"metadata": {"finalizers": []}})
        index.observe_service("ns/b", None)
        assert index.legacy() is None


NAMES = st.sampled_from(["a/x", "a/y", "a-b/x", "b/x", "b/y"])
JOURNALS = st.one_of(
    st.none(),
    st.tuples(
        st.sampled_from([ME, "istio"]),
        st.lists(st.sampled_from([route("t1"), route("t2"), route("t3"), ""]), max_size=3),
    ),
)


@given(
    st.lists(st.tuples(NAMES, JOURNALS), max_size=12),
    st.sampled_from(["a/x", "b/y"]),
    st.lists(st.sampled_from([route("t1"), route("t2"), route("t3")]), max_size=2),
)
def test_the_index_reports_what_a_full_scan_reports(
    events: list[tuple[str, Any]], me: str, wanted: list[str]
) -> None:
    index = ClaimIndex(ME)
    current: dict[str, Any] = {}
    for key, journal in events:
        obj = None if journal is None else tmap(key, f"uid-{key}", journal[0], journal[1])
        index.observe_map(key, obj)
        if obj is None:
            current.pop(key, None)
        else:
            current[key] = obj
    listed = list(current.values())
    random.Random(0).shuffle(listed)
    uid = f"uid-{me}"
    assert index.collision(uid, wanted) == collision_problem(uid, wanted, listed, ME)
