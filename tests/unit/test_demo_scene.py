"""The demo's scene: the objects it writes and how it reads a TrafficMap's homes."""

from __future__ import annotations

import yaml

from ome_routing_dev.demo.scene import (
    capacities,
    fallback_condition,
    home_states,
    placement_status,
    workload_clusters_manifest,
)

MAP = {
    "spec": {
        "entries": [
            {"cluster": "worker-a", "capacity": {"reported": 3, "source": "ControlPlane"}},
            {
                "cluster": "worker-b",
                "capacity": {"fallbackReason": "capacity endpoint returned HTTP 404"},
            },
            {"cluster": "worker-c"},
        ]
    },
    "status": {
        "conditions": [
            {"type": "Routable", "status": "True"},
            {"type": "CapacityFallback", "status": "True"},
        ]
    },
}


def test_each_home_reads_as_its_ceiling_or_why_it_has_none() -> None:
    assert home_states(MAP) == {
        "worker-a": "ceiling 3",
        "worker-b": "capacity endpoint returned HTTP 404",
        "worker-c": "no ceiling",
    }
    assert home_states({}) == {}


def test_the_fallback_condition_is_read_by_type() -> None:
    assert fallback_condition(MAP) == "True"
    assert (
        fallback_condition({"status": {"conditions": [{"type": "Routable", "status": "True"}]}})
        is None
    )


def test_capacities_keep_the_maps_order_and_fill_missing_blocks() -> None:
    assert [c.get("reported") for c in capacities(MAP)] == [3, None, None]


def test_the_placement_status_admits_every_home_at_its_endpoint() -> None:
    status = placement_status(
        {"worker-a": "http://127.0.0.1:1/", "worker-b": "http://127.0.0.1:2/"}
    )
    placement = status["status"]["placement"]
    assert placement["phase"] == "Placed"
    assert [(c["cluster"], c["phase"], c["endpoint"]) for c in placement["candidates"]] == [
        ("worker-a", "Admitted", "http://127.0.0.1:1/"),
        ("worker-b", "Admitted", "http://127.0.0.1:2/"),
    ]


def test_workload_clusters_name_one_kubeconfig_secret_each() -> None:
    """OME's schema requires exactly one cluster source; routing never reads it."""
    documents = list(yaml.safe_load_all(workload_clusters_manifest(["worker-a", "worker-b"])))
    assert documents == [
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "WorkloadCluster",
            "metadata": {"name": name},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {"secretRef": {"name": f"{name}-kubeconfig", "namespace": "ome"}}
                }
            },
        }
        for name in ("worker-a", "worker-b")
    ]
