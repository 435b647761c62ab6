"""Reconcile decisions for one service's TrafficMap, from raw objects (no API server)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from ome_routing.core.capacity import Verdict
from ome_routing.core.config import OperatorConfig, config_from_values
from ome_routing.core.trafficmap import PollingState
from ome_routing.kube import reconcile
from ome_routing.kube.ownership import has_exact_controller
from ome_routing.kube.reconcile import Frozen, NotOurs, Routed, Unrouted

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
UID = "0f8e2c1a-5b7d-4e39-9c61-2d4a8b3f7e10"
NOW = datetime(2026, 11, 29, 17, 0, tzinfo=UTC)


def chart(**routing: Any) -> OperatorConfig:
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    values["ome"]["multicluster"]["config"]["routing"].update(routing)
    return config_from_values(values)


def an_isvc(**spec_routing: Any) -> dict[str, Any]:
    isvc = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
    isvc["metadata"].update(uid=UID, generation=3)
    isvc["spec"]["routing"].update(spec_routing)
    isvc["status"] = {
        "placement": {
            "phase": "Placed",
            "candidates": [
                {
                    "cluster": c,
                    "phase": "Admitted",
                    "endpoint": f"http://127.0.0.1:{port}",
                    "admittedReplicas": 2,
                    "readyReplicas": 2,
                }
                for c, port in (("worker-a", 9001), ("worker-b", 9002))
            ],
        }
    }
    return isvc


def a_map(owner_uid: str | None = UID, **extra: Any) -> dict[str, Any]:
    refs = (
        []
        if owner_uid is None
        else [
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "name": "qwen3-0-6b",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    )
    return {
        "metadata": {
            "name": "qwen3-0-6b",
            "namespace": "qwen3-0-6b",
            "generation": 1,
            "ownerReferences": refs,
        }
    } | extra


def test_the_specs_service_is_routed_with_its_own_poll_on_both_homes() -> None:
    decision = reconcile.plan(an_isvc(), None, chart())
    assert isinstance(decision, Routed)
    assert decision.polling is PollingState.ON
    assert decision.poll is not None and (decision.poll.samples, decision.poll.quorum) == (4, 3)
    assert decision.targets() == {
        "worker-a": "http://127.0.0.1:9001",
        "worker-b": "http://127.0.0.1:9002",
    }


def test_the_specs_step_3_entries_follow_from_ceilings_3_and_1() -> None:
    decision = reconcile.plan(an_isvc(), None, chart())
    assert isinstance(decision, Routed)
    view = reconcile.build_view(
        decision, {"worker-a": Verdict(3, None), "worker-b": Verdict(1, None)}
    )
    spec = reconcile.desired_spec("qwen3-0-6b", decision, view)
    rows = [
        f"{e['cluster']} {e['weight']} {e['capacity'].get('allocated', '')} {e['capacity'].get('ready', '')} "
        f"{e['capacity']['source']} {e['capacity'].get('reported', '')}"
        for e in spec["entries"]
    ]
    assert rows == ["worker-a 2 2 2 ControlPlane 3", "worker-b 1 1 2 Endpoint 1"]
    assert (spec["service"], spec["mode"], spec["observedISVCGeneration"]) == (
        "qwen3-0-6b",
        "All",
        3,
    )


def test_disabled_polling_polls_no_home() -> None:
    isvc = an_isvc()
    isvc["spec"]["routing"]["capacity"] = {"disabled": True}
    decision = reconcile.plan(isvc, None, chart())
    assert isinstance(decision, Routed)
    assert (decision.polling, decision.targets()) == (PollingState.DISABLED, {})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"maxAge": "20s"},
            "validate routing policy: spec.routing.capacity.maxAge (20s) must span at least quorum (3) period intervals",
        ),
        (
            {"format": "report"},
            'resolve capacity policy: spec.routing.capacity.format "report" is not registered in this build (available: [Report])',
        ),
        (
            {"period": "500ms", "timeout": "100ms", "maxAge": "40s"},
            "resolve capacity policy: spec.routing.capacity.period (500ms) must be at least routing.observer.minPeriod (1s)",
        ),
        (
            {"samples": 200},
            "resolve capacity policy: spec.routing.capacity.samples (200) must not exceed routing.observer.maxSamples (100)",
        ),
    ],
)
def test_the_specs_policy_mistakes_freeze_the_map_with_the_log_line(
    change: dict[str, Any], message: str
) -> None:
    isvc = an_isvc()
    isvc["spec"]["routing"]["capacity"].update(change)
    assert reconcile.plan(isvc, a_map(), chart()) == Frozen(message)


def test_a_malformed_drain_annotation_freezes_the_map() -> None:
    isvc = an_isvc()
    isvc["metadata"]["annotations"] = {"ome.io/traffic-drain": "{not json"}
    decision = reconcile.plan(isvc, a_map(), chart())
    assert isinstance(decision, Frozen)
    assert decision.message.startswith("parse ome.io/traffic-drain: ")


def test_a_map_controlled_by_another_service_is_left_alone_and_the_log_quotes_the_uid() -> None:
    decision = reconcile.plan(an_isvc(), a_map(owner_uid="another-uid"), chart())
    assert decision == NotOurs(
        "TrafficMap qwen3-0-6b/qwen3-0-6b exists but is not controlled by "
        f'InferenceService UID "{UID}"'
    )


def test_a_map_that_records_another_source_uid_is_not_ours() -> None:
    decision = reconcile.plan(an_isvc(), a_map(status={"sourceUID": "old-uid"}), chart())
    assert decision == NotOurs(
        'TrafficMap qwen3-0-6b/qwen3-0-6b source UID "old-uid" does not match '
        f'InferenceService UID "{UID}"'
    )


def test_nothing_is_written_to_a_map_the_service_does_not_control() -> None:
    foreign = a_map(owner_uid="another-uid", status={"conditions": []})
    view = routed_view()
    assert reconcile.desired_status(foreign, UID, reconcile.routed_conditions(view), NOW) == {
        "conditions": []
    }


def test_a_map_without_an_owner_is_not_ours_either() -> None:
    assert isinstance(reconcile.plan(an_isvc(), a_map(owner_uid=None), chart()), NotOurs)


@pytest.mark.parametrize(
    ("isvc", "config", "deleted"),
    [
        (an_isvc(enabled=False), chart(), True),
        (None, chart(), False),
        (an_isvc(), OperatorConfig(), True),
    ],
    ids=["routing-enabled-false", "service-gone-left-to-gc", "routing-off-in-chart"],
)
def test_an_unrouted_service_loses_its_map(
    isvc: dict[str, Any] | None, config: OperatorConfig, deleted: bool
) -> None:
    assert reconcile.plan(isvc, a_map(), config) == Unrouted(delete_map=deleted)


def test_an_unrouted_service_never_deletes_a_map_it_does_not_control() -> None:
    assert reconcile.plan(
        an_isvc(enabled=False), a_map(owner_uid="another-uid"), chart()
    ) == Unrouted(False)


def test_a_service_without_placement_is_not_routed() -> None:
    isvc = an_isvc()
    del isvc["spec"]["placement"]
    assert reconcile.plan(isvc, None, chart()) == Unrouted(delete_map=False)


def test_status_in_steady_state_equals_what_is_stored() -> None:
    """Merging the same conditions again must give the stored status: no write."""
    decision = reconcile.plan(an_isvc(), None, chart())
    assert isinstance(decision, Routed)
    view = reconcile.build_view(
        decision, {"worker-a": Verdict(3, None), "worker-b": Verdict(1, None)}
    )
    tmap = a_map()
    tmap["status"] = reconcile.desired_status(tmap, UID, reconcile.routed_conditions(view), NOW)
    later = reconcile.desired_status(
        copy.deepcopy(tmap), UID, reconcile.routed_conditions(view), NOW.replace(hour=18)
    )
    assert later == tmap["status"]
    fallback = next(c for c in later["conditions"] if c["type"] == "CapacityFallback")
    assert (fallback["status"], fallback["reason"], fallback["message"]) == (
        "False",
        "EndpointCapacityAvailable",
        "endpoint capacity is available for all 2 home(s)",
    )
    # `Published` is the publisher's condition, never the routing controller's
    assert "Published" not in [c["type"] for c in later["conditions"]]


def routed_view() -> Any:
    decision = reconcile.plan(an_isvc(), None, chart())
    assert isinstance(decision, Routed)
    return reconcile.build_view(
        decision, {"worker-a": Verdict(3, None), "worker-b": Verdict(1, None)}
    )


def test_the_status_apply_carries_only_the_routing_fields_and_the_read_version() -> None:
    """OME's server-side apply: sourceUID and Routable, CapacityFallback, OverrideActive,
    never the publisher's Published, on the map's resourceVersion."""
    tmap = a_map(status={"conditions": [{"type": "Published", "status": "True"}]})
    tmap["metadata"]["resourceVersion"] = "41"
    status = reconcile.desired_status(tmap, UID, reconcile.routed_conditions(routed_view()), NOW)
    body = reconcile.status_apply(tmap, status)
    assert body["metadata"] == {
        "name": "qwen3-0-6b",
        "namespace": "qwen3-0-6b",
        "resourceVersion": "41",
    }
    assert body["status"]["sourceUID"] == UID
    assert [c["type"] for c in body["status"]["conditions"]] == [
        "Routable",
        "CapacityFallback",
        "OverrideActive",
    ]


def test_a_new_map_is_controlled_by_its_service_and_carries_no_label() -> None:
    body = reconcile.new_map("qwen3-0-6b", "qwen3-0-6b", UID, {"service": "qwen3-0-6b"})
    assert has_exact_controller(body, "qwen3-0-6b", UID)
    assert body["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True
    assert "labels" not in body["metadata"]


def test_a_service_being_deleted_loses_its_map() -> None:
    isvc = an_isvc()
    isvc["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    assert reconcile.plan(isvc, a_map(), chart()) == Unrouted(delete_map=True)


# --- the order of the checks (OME's reconcile order) ---------------------------------

BAD_DRAIN = {"ome.io/traffic-drain": ""}
DRAIN_ERROR = "parse ome.io/traffic-drain: decode top-level object: EOF"
VALIDATE_ERROR = (
    "validate routing policy: spec.routing.capacity.maxAge (20s) "
    "must span at least quorum (3) period intervals"
)
RESOLVE_ERROR = (
    "resolve capacity policy: spec.routing.capacity.samples (200) "
    "must not exceed routing.observer.maxSamples (100)"
)


def broken(
    *, drain: bool = False, validate: bool = False, resolve: bool = False, intent: bool = False
) -> dict[str, Any]:
    isvc = an_isvc()
    if drain:
        isvc["metadata"]["annotations"] = dict(BAD_DRAIN)
    if validate:
        isvc["spec"]["routing"]["capacity"]["maxAge"] = "20s"
    if resolve:
        isvc["spec"]["routing"]["capacity"]["samples"] = 200
    if intent:
        isvc["spec"]["placement"]["mode"] = 7
    return isvc


def test_an_accepted_plan_without_cluster_affinity_freezes_the_map_before_anything_else() -> None:
    isvc = broken(drain=True, validate=True, intent=True)
    isvc["spec"]["placement"]["policy"] = "Spread"
    isvc["spec"]["routing"]["enabled"] = False
    isvc["status"]["placement"]["plan"] = {"id": "plan-1"}
    assert reconcile.plan(isvc, a_map(owner_uid="another-uid"), chart()) == Frozen(
        "an accepted placement plan requires spec.placement.policy: ClusterAffinity"
    )


def test_routing_off_reaps_the_map_before_any_validation() -> None:
    isvc = broken(drain=True, validate=True, intent=True)
    isvc["spec"]["routing"]["enabled"] = False
    assert reconcile.plan(isvc, a_map(), chart()) == Unrouted(delete_map=True)


def test_a_placement_intent_error_comes_before_policy_and_drain_errors() -> None:
    decision = reconcile.plan(broken(drain=True, validate=True, intent=True), a_map(), chart())
    assert decision == Frozen(
        "validate placement intent: spec.placement.mode must be a string, got 7"
    )


def test_a_policy_validation_error_comes_before_a_drain_error() -> None:
    decision = reconcile.plan(broken(drain=True, validate=True), a_map(), chart())
    assert decision == Frozen(VALIDATE_ERROR)


def test_a_drain_error_comes_before_a_capacity_resolution_error() -> None:
    decision = reconcile.plan(broken(drain=True, resolve=True), a_map(), chart())
    assert decision == Frozen(DRAIN_ERROR)


@pytest.mark.parametrize(
    ("isvc", "message"),
    [
        (broken(drain=True), DRAIN_ERROR),
        (broken(validate=True), VALIDATE_ERROR),
        (broken(resolve=True), RESOLVE_ERROR),
    ],
    ids=["drain", "validate", "resolve"],
)
def test_a_policy_or_drain_error_beats_a_foreign_map(isvc: dict[str, Any], message: str) -> None:
    assert reconcile.plan(isvc, a_map(owner_uid="another-uid"), chart()) == Frozen(message)


# --- the map's spec -------------------------------------------------------------------


def routed(isvc: dict[str, Any]) -> Routed:
    decision = reconcile.plan(isvc, None, chart())
    assert isinstance(decision, Routed)
    return decision


def test_the_spec_carries_the_accepted_plans_id() -> None:
    isvc = an_isvc()
    isvc["status"]["placement"]["plan"] = {"id": "plan-7f3a"}
    decision = routed(isvc)
    spec = reconcile.desired_spec("qwen3-0-6b", decision, reconcile.build_view(decision, {}))
    assert spec["placementPlanID"] == "plan-7f3a"


def test_without_a_plan_the_spec_leaves_the_plan_id_out() -> None:
    decision = routed(an_isvc())
    spec = reconcile.desired_spec("qwen3-0-6b", decision, reconcile.build_view(decision, {}))
    assert "placementPlanID" not in spec
    assert spec["mode"] == "All"


def test_a_service_without_a_mode_is_frozen_with_omes_intent_error() -> None:
    isvc = an_isvc()
    del isvc["spec"]["placement"]["mode"]
    assert reconcile.plan(isvc, a_map(), chart()) == Frozen(
        "validate placement intent: spec.placement.mode must explicitly select "
        "Single, All, Split, or SplitByCapacity"
    )


def test_the_plans_id_is_written_whenever_a_plan_exists_even_before_placement() -> None:
    isvc = an_isvc()
    isvc["status"]["placement"] = {"phase": "Pending", "plan": {"id": "plan-1", "mode": "All"}}
    decision = routed(isvc)
    view = reconcile.build_view(decision, {})
    spec = reconcile.desired_spec("qwen3-0-6b", decision, view)
    assert spec["placementPlanID"] == "plan-1"
    assert "entries" not in spec
    assert view.condition("Routable").reason == "NotPlaced"


def test_an_empty_table_is_left_out_of_the_spec() -> None:
    isvc = an_isvc()
    isvc["status"]["placement"]["phase"] = "Placing"
    decision = routed(isvc)
    spec = reconcile.desired_spec("qwen3-0-6b", decision, reconcile.build_view(decision, {}))
    assert spec == {"service": "qwen3-0-6b", "mode": "All", "observedISVCGeneration": 3}


def test_a_reported_ceiling_of_zero_is_kept_and_zero_counts_are_left_out() -> None:
    decision = routed(an_isvc())
    view = reconcile.build_view(
        decision, {"worker-a": Verdict(0, None), "worker-b": Verdict(1, None)}
    )
    worker_a = reconcile.desired_spec("qwen3-0-6b", decision, view)["entries"][0]
    assert worker_a["capacity"] == {"ready": 2, "source": "Endpoint", "reported": 0}
    assert (worker_a["weight"], worker_a["healthy"]) == (0, True)


def test_the_spec_patch_removes_what_the_new_spec_leaves_out() -> None:
    stored = a_map(spec={"service": "s", "mode": "All", "entries": [{"cluster": "worker-a"}]})
    stored["metadata"]["resourceVersion"] = "17"
    assert reconcile.spec_patch(stored, {"service": "s"}) == {
        "metadata": {"resourceVersion": "17"},
        "spec": {"mode": None, "entries": None, "service": "s"},
    }


def test_the_status_leaves_published_out_while_nothing_is_published() -> None:
    """`status.published` is omitted while false, as OME's omitempty bool."""
    decision = routed(an_isvc())
    view = reconcile.build_view(decision, {})
    status = reconcile.desired_status(a_map(), UID, reconcile.routed_conditions(view), NOW)
    assert "published" not in status
    assert status["sourceUID"] == UID


# --- eligibility (OME's IsPlacementEligible) --------------------------------------------


@pytest.mark.parametrize(
    "mark",
    [
        {"labels": {"ome.io/placement-origin": "qwen3-0-6b"}},
        {"annotations": {"ome.io/placement-origin-uid": "parent-uid"}},
    ],
    ids=["origin-label", "origin-uid-annotation"],
)
def test_a_derived_copy_is_never_routed_and_loses_its_map(mark: dict[str, Any]) -> None:
    isvc = an_isvc()
    isvc["metadata"].update(mark)
    assert reconcile.plan(isvc, a_map(), chart()) == Unrouted(delete_map=True)


def test_an_annotation_only_service_is_eligible_then_frozen_by_omes_intent_check() -> None:
    isvc = an_isvc()
    del isvc["spec"]["placement"]
    isvc["metadata"]["annotations"] = {"ome.io/cluster-selector": ""}
    assert reconcile.plan(isvc, None, chart()) == Frozen(
        "validate placement intent: annotation ome.io/cluster-selector is unsupported; "
        "declare spec.placement.mode and migrate restrictions to clusterAffinity"
    )


def test_a_plan_without_cluster_affinity_holds_the_map_even_with_routing_off() -> None:
    """OME checks the plan before the routing gate: the map is not reaped while it holds."""
    isvc = an_isvc()
    isvc["spec"]["placement"]["policy"] = "Spread"
    isvc["status"]["placement"]["plan"] = {"id": "plan-1"}
    assert reconcile.plan(isvc, a_map(), OperatorConfig()) == Frozen(
        "an accepted placement plan requires spec.placement.policy: ClusterAffinity"
    )


@pytest.mark.parametrize(
    ("endpoint", "written"),
    [
        ("HTTPS://worker-a.example", "https://worker-a.example"),
        ("http://worker-a.example/a b", "http://worker-a.example/a%20b"),
        ("http://worker-a.example/a%2Fb", "http://worker-a.example/a%2Fb"),
        ("http://127.0.0.1:9001", "http://127.0.0.1:9001"),
    ],
)
def test_an_entrys_endpoint_is_written_as_gos_url_type_writes_it(
    endpoint: str, written: str
) -> None:
    """OME copies the candidate's `*apis.URL` into the entry: Go's `url.Parse`, then
    `URL.String()` (issue 36: `HTTPS://worker-a.example` becomes `https://...`)."""
    isvc = an_isvc()
    isvc["status"]["placement"]["candidates"][0]["endpoint"] = endpoint
    decision = routed(isvc)
    spec = reconcile.desired_spec("qwen3-0-6b", decision, reconcile.build_view(decision, {}))
    assert [e["endpoint"] for e in spec["entries"] if e["cluster"] == "worker-a"] == [written]
