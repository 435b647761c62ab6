"""The demo's scene: its homes and counts, the objects it creates, and how it reads a map.

Pure functions over plain dicts, so that what the demo writes and how it narrates a
TrafficMap are tested without a control plane (`tests/unit/test_demo_scene.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

HOMES: dict[str, int] = {"worker-a": 3, "worker-b": 1}  # servable counts, as in Step 3
ADMITTED = 2
READY = 2
KUBECONFIG_NAMESPACE = "ome"  # of the Secrets the WorkloadClusters name (never read)


def workload_clusters_manifest(names: list[str]) -> str:
    """WorkloadCluster objects valid for OME's schema: each names its kubeconfig Secret.

    Routing reads only their names; the Secrets `<name>-kubeconfig` are never read and
    need not exist.
    """
    documents = [
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "WorkloadCluster",
            "metadata": {"name": n},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {
                        "secretRef": {"name": f"{n}-kubeconfig", "namespace": KUBECONFIG_NAMESPACE}
                    }
                }
            },
        }
        for n in names
    ]
    return yaml.safe_dump_all(documents, sort_keys=False)


def placement_status(endpoints: Mapping[str, str]) -> dict[str, Any]:
    """`status.placement` as OME's placement controller writes it for a service placed on all homes."""
    return {
        "status": {
            "placement": {
                "phase": "Placed",
                "candidates": [
                    {
                        "cluster": cluster,
                        "phase": "Admitted",
                        "endpoint": endpoint,
                        "admittedReplicas": ADMITTED,
                        "readyReplicas": READY,
                    }
                    for cluster, endpoint in endpoints.items()
                ],
            }
        }
    }


def home_states(trafficmap: Mapping[str, Any]) -> dict[str, str]:
    """Each home's capacity state in a few words: its ceiling, or why it has none."""
    states: dict[str, str] = {}
    for entry in (trafficmap.get("spec") or {}).get("entries") or []:
        capacity = entry.get("capacity") or {}
        if "reported" in capacity:
            states[entry.get("cluster", "?")] = f"ceiling {capacity['reported']}"
        else:
            states[entry.get("cluster", "?")] = capacity.get("fallbackReason") or "no ceiling"
    return states


def fallback_condition(trafficmap: Mapping[str, Any]) -> str | None:
    """The status of the `CapacityFallback` condition, if the map has one."""
    for condition in (trafficmap.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "CapacityFallback":
            return str(condition.get("status"))
    return None


def capacities(trafficmap: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Each entry's `capacity` block, in the map's order."""
    entries = (trafficmap.get("spec") or {}).get("entries") or []
    return [entry.get("capacity") or {} for entry in entries]
