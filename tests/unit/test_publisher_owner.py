"""Which maps the publisher trusts: OME's owner checks, and nothing else."""

from __future__ import annotations

from typing import Any

from test_reconcile import UID, a_map, an_isvc, chart

from ome_routing.kube.publisher_inputs import owner_problem


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
        "TrafficMap is stale for its InferenceService's generation"
    )


def test_a_map_without_its_service_is_not() -> None:
    assert owner_problem(a_written_map(), None, chart()) is not None
