"""Which maps the publisher trusts: OME's owner checks, and nothing else."""

from __future__ import annotations

from typing import Any

from test_reconcile import UID, a_map, an_isvc, chart

from ome_routing.kube.publisher_inputs import intent_problem, owner_problem


def a_written_map(**spec: Any) -> dict[str, Any]:
    """A map as the routing controller leaves it for `an_isvc()` (generation 3)."""
    return a_map(
        spec={"service": "qwen3-0-6b", "observedISVCGeneration": 3, **spec},
        status={"sourceUID": UID},
    )


def test_a_map_written_for_its_service_is_trusted() -> None:
    assert owner_problem(a_written_map(), an_isvc(), chart()) is None


def test_a_map_without_its_service_as_controller_is_not() -> None:
    tmap = a_written_map()
    tmap["metadata"]["ownerReferences"] = []
    assert owner_problem(tmap, an_isvc(), chart()) is not None


def test_a_map_of_another_uid_is_not() -> None:
    tmap = a_written_map()
    tmap["status"]["sourceUID"] = "another"
    assert owner_problem(tmap, an_isvc(), chart()) is not None


def test_a_map_behind_its_services_generation_is_not() -> None:
    isvc = an_isvc()
    isvc["metadata"]["generation"] = 4
    assert owner_problem(a_written_map(), isvc, chart()) is not None


def test_a_map_naming_another_service_is_not() -> None:
    assert owner_problem(a_written_map(service="other"), an_isvc(), chart()) is not None


def test_a_frozen_map_at_the_same_generation_is_still_trusted() -> None:
    """A bad drain annotation freezes the map without a new generation of the service's
    spec: OME's publisher keeps publishing the last spec (`Published` stays as it was)."""
    isvc = an_isvc()
    isvc["metadata"]["annotations"] = {"ome.io/traffic-drain": "nope"}
    assert owner_problem(a_written_map(), isvc, chart()) is None


def test_a_frozen_map_behind_a_new_generation_is_not() -> None:
    """An error in spec.routing is a spec change: the map's generation falls behind."""
    isvc = an_isvc()
    isvc["metadata"]["generation"] = 4
    isvc["spec"]["routing"]["capacity"]["samples"] = 200
    assert owner_problem(a_written_map(), isvc, chart()) == (
        "TrafficMap owner binding is invalid: TrafficMap observed InferenceService "
        "generation 3 does not match owner generation 4"
    )


def test_a_map_without_its_service_is_not() -> None:
    assert owner_problem(a_written_map(), None, chart()) is not None


def test_a_new_map_without_a_source_uid_is_not() -> None:
    """OME's `validatePublisherSourceUID`, reached through its owner check
    (TestTrafficMapPublisherValidatesOwnerIdentityBeforeOptionsOrPlan): a map whose first
    routing status is not written yet is refused, in OME's words."""
    tmap = a_written_map()
    del tmap["status"]["sourceUID"]
    namespace = tmap["metadata"]["namespace"]
    assert owner_problem(tmap, an_isvc(), chart()) == (
        "TrafficMap source provenance changed during reconciliation: "
        f"TrafficMap {namespace}/qwen3-0-6b source UID is not established"
    )


def test_owner_problems_carry_omes_errors() -> None:
    tmap = a_written_map()
    tmap["status"]["sourceUID"] = "another"
    problem = owner_problem(tmap, an_isvc(), chart())
    assert problem is not None
    assert problem.startswith("TrafficMap source provenance changed during reconciliation: ")
    assert f'source UID "another" does not match InferenceService UID "{UID}"' in problem
    assert owner_problem(a_written_map(service="other"), an_isvc(), chart()) == (
        "TrafficMap owner binding is invalid: "
        'TrafficMap service "other" does not match owner name "qwen3-0-6b"'
    )


def test_a_valid_intent_keeps_the_owner_active() -> None:
    assert intent_problem(an_isvc()) is None


def test_an_obsolete_selector_annotation_makes_the_owner_inactive() -> None:
    """OME's `publisherOwnerActive` requires `ValidatePlacementIntent(owner) == nil`
    (`endpoint/trafficmap_publisher.go@2af192b3`; the inactive cases of
    TestTrafficMapPublisherSkipsWhenInactiveOrOwnerStops): the annotation of issue 36."""
    isvc = an_isvc()
    isvc["metadata"]["annotations"] = {"ome.io/cluster-selector": "region=west"}
    assert intent_problem(isvc) == (
        "annotation ome.io/cluster-selector is unsupported; declare spec.placement.mode "
        "and migrate restrictions to clusterAffinity"
    )


def test_a_plan_without_cluster_affinity_makes_the_owner_inactive() -> None:
    isvc = an_isvc()
    isvc["spec"]["placement"]["policy"] = "Legacy"
    isvc["status"]["placement"]["plan"] = {"id": "p1", "revision": 1}
    assert intent_problem(isvc) is not None
