"""Which maps the publisher trusts: OME's owner checks, plus a map the routing controller froze."""

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


def test_a_frozen_map_is_not_even_at_the_same_generation() -> None:
    """A bad drain annotation freezes the map without a new generation of the service's spec."""
    isvc = an_isvc()
    isvc["metadata"]["annotations"] = {"ome.io/traffic-drain": "nope"}
    assert owner_problem(a_written_map(), isvc, chart()) == (
        "the routing controller has frozen the TrafficMap"
    )


def test_a_map_without_its_service_is_not() -> None:
    assert owner_problem(a_written_map(), None, chart()) is not None
