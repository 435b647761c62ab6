"""Homes come from status.placement: admitted candidates with an endpoint, while Placed."""

from __future__ import annotations

from typing import Any

import pytest

from ome_routing.core.placement import (
    PlacedHome,
    PlacementError,
    PlacementIntentError,
    plan_lacks_cluster_affinity,
    read_placement,
)


def candidate(cluster: str, **fields: Any) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "phase": "Admitted",
        "endpoint": f"http://qwen3-0-6b.qwen3-0-6b.{cluster}.example.com",
        "admittedReplicas": 2,
        "readyReplicas": 2,
    } | fields


def status(*candidates: dict[str, Any], phase: str = "Placed") -> dict[str, Any]:
    return {"placement": {"phase": phase, "candidates": list(candidates)}}


def test_the_specs_two_admitted_clusters_are_homes_sorted_by_name() -> None:
    placement = read_placement(
        {"placement": {"mode": "All"}}, status(candidate("worker-b"), candidate("worker-a"))
    )
    assert placement.placed
    assert placement.mode == "All"
    assert [h.cluster for h in placement.homes] == ["worker-a", "worker-b"]
    assert placement.homes[0] == PlacedHome(
        "worker-a", "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com", admitted=2, ready=2
    )


@pytest.mark.parametrize("phase", ["Pending", "Placing", "Failed", None])
def test_a_service_that_is_not_placed_has_no_homes(phase: str | None) -> None:
    placement = read_placement(
        {}, {"placement": {"phase": phase, "candidates": [candidate("worker-a")]}}
    )
    assert (placement.placed, placement.homes) == (False, ())


def test_without_placement_status_the_service_is_not_placed() -> None:
    assert read_placement({}, {}).placed is False


@pytest.mark.parametrize(
    "excluded",
    [
        candidate("worker-c", phase="Rejected"),
        candidate("worker-c", phase="Pending"),
        candidate("worker-c", endpoint=""),
        {k: v for k, v in candidate("worker-c").items() if k != "endpoint"},
    ],
)
def test_candidates_that_are_not_admitted_or_have_no_endpoint_are_not_homes(
    excluded: dict[str, Any],
) -> None:
    placement = read_placement({}, status(candidate("worker-a"), excluded))
    assert [h.cluster for h in placement.homes] == ["worker-a"]


def test_missing_replica_counts_are_zero() -> None:
    bare = {"cluster": "worker-a", "phase": "Admitted", "endpoint": "http://a"}
    placement = read_placement({}, status(bare))
    assert (placement.homes[0].admitted, placement.homes[0].ready) == (0, 0)


@pytest.mark.parametrize(
    ("spec", "mode"),
    [
        ({}, None),
        ({"placement": {"policy": "ClusterAffinity"}}, None),
        ({"placement": {"mode": "Split"}}, "Split"),
        ({"placement": {"mode": "SomethingNew"}}, "SomethingNew"),
    ],
    ids=["no-placement", "no-mode", "split", "verbatim"],
)
def test_the_mode_is_copied_as_written_with_no_default(
    spec: dict[str, Any], mode: str | None
) -> None:
    assert read_placement(spec, status(candidate("worker-a"))).mode == mode


def test_the_plan_id_comes_from_the_accepted_plan() -> None:
    placed = status(candidate("worker-a"))
    assert read_placement({}, placed).plan_id is None
    placed["placement"]["plan"] = {"id": "plan-7f3a"}
    assert read_placement({}, placed).plan_id == "plan-7f3a"


@pytest.mark.parametrize("endpoint", ["worker-a.example.com", "http://", "file:///tmp/x"])
def test_an_endpoint_without_a_host_is_not_addressable(endpoint: str) -> None:
    placement = read_placement(
        {}, status(candidate("worker-a"), candidate("worker-b", endpoint=endpoint))
    )
    assert [h.cluster for h in placement.homes] == ["worker-a"]


@pytest.mark.parametrize(
    ("policy", "plan", "lacks"),
    [
        ("ClusterAffinity", {"id": "p"}, False),
        (None, {"id": "p"}, True),
        ("Spread", {}, True),
        (None, None, False),
    ],
)
def test_an_accepted_plan_needs_the_cluster_affinity_policy(
    policy: str | None, plan: dict[str, Any] | None, lacks: bool
) -> None:
    spec = {"placement": {"policy": policy}} if policy else {"placement": {}}
    placed = status(candidate("worker-a"))
    if plan is not None:
        placed["placement"]["plan"] = plan
    assert plan_lacks_cluster_affinity(spec, placed) is lacks


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"placement": ["x"]}, "spec.placement must be an object, got ['x']"),
        ({"placement": {"mode": 5}}, "spec.placement.mode must be a string, got 5"),
        ({"placement": {"policy": True}}, "spec.placement.policy must be a string, got True"),
    ],
)
def test_a_malformed_intent_is_an_intent_error(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(PlacementIntentError) as caught:
        read_placement(spec, {"placement": "not an object"})
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            candidate("worker-a", admittedReplicas=-1),
            "status.placement.candidates[0].admittedReplicas must be a whole number 0 or more, got -1",
        ),
        (
            candidate("worker-a", readyReplicas="2"),
            "status.placement.candidates[0].readyReplicas must be a whole number 0 or more, got '2'",
        ),
        (
            candidate("worker-a", readyReplicas=True),
            "status.placement.candidates[0].readyReplicas must be a whole number 0 or more, got True",
        ),
        (
            candidate("", endpoint="http://a"),
            "status.placement.candidates[0].cluster must be a name, got ''",
        ),
    ],
)
def test_a_malformed_candidate_is_an_error_naming_the_field_and_value(
    bad: dict[str, Any], message: str
) -> None:
    with pytest.raises(PlacementError) as caught:
        read_placement({}, status(bad))
    assert str(caught.value) == message


def test_the_same_cluster_twice_is_an_error() -> None:
    with pytest.raises(PlacementError, match="'worker-a' appears twice"):
        read_placement({}, status(candidate("worker-a"), candidate("worker-a")))
