"""InferenceServices and TrafficMaps as the API server returns them, for the `kubectl ome` tests."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 9, 15, 12, 0, 0, tzinfo=UTC)
UID = "2f6c1d9e-4b7a-4c1e-9f3d-8a5b6c7d0e12"
DIGEST = "sha256:" + "0a3bbc1f65ab1d3e469f4cfb714a1cfea0e1d9e27d7241255af83022da31b76f"[:64]
STAMP = "2026-09-15T11:00:00Z"


def an_isvc(
    name: str = "chat",
    namespace: str = "prod",
    *,
    mode: str = "All",
    homes: tuple[str, ...] = ("worker-a", "worker-b"),
    generation: int = 3,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A placed InferenceService with one admitted candidate per home."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": UID,
        "generation": generation,
        "resourceVersion": "1284711",
    }
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": meta,
        "spec": {"placement": {"policy": "ClusterAffinity", "mode": mode}},
        "status": {
            "placement": {
                "phase": "Placed",
                "candidates": [
                    {
                        "cluster": home,
                        "phase": "Admitted",
                        "endpoint": f"https://{name}.{home}.example.com/v1",
                        "admittedReplicas": 2,
                        "readyReplicas": 2,
                    }
                    for home in homes
                ],
            }
        },
    }


def a_condition(
    kind: str, status: str, reason: str, generation: int = 4, *, stamp: str = STAMP
) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": f"{kind} is {status}",
        "observedGeneration": generation,
        "lastTransitionTime": stamp,
    }


def an_entry(cluster: str, weight: int = 1, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "cluster": cluster,
        "endpoint": f"https://chat.{cluster}.example.com/v1",
        "weight": weight,
        "healthy": True,
        "capacity": {"allocated": 2, "ready": 2, "source": "ControlPlane"},
    }
    entry.update(fields)
    return entry


def a_trafficmap(
    *entries: dict[str, Any],
    name: str = "chat",
    namespace: str = "prod",
    owner_uid: str = UID,
    generation: int = 4,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A TrafficMap the controller wrote for `an_isvc()`, current and published."""
    if conditions is None:
        conditions = [
            a_condition("Routable", "True", "Routable", generation),
            a_condition("OverrideActive", "False", "NoOverrides", generation),
            a_condition("CapacityFallback", "False", "CapacityPollingDisabled", generation),
            a_condition("Published", "True", "Published", generation),
        ]
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": "7c1d0c1e-0000-4000-8000-000000000001",
            "generation": generation,
            "creationTimestamp": "2026-09-15T09:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": name,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "service": name,
            "mode": "All",
            "observedISVCGeneration": 3,
            "entries": [copy.deepcopy(entry) for entry in entries],
        },
        "status": {
            "observedTrafficMapGeneration": generation,
            "published": True,
            "gatewayRef": {
                "group": "gateway.networking.k8s.io",
                "kind": "HTTPRoute",
                "name": name,
            },
            "conditions": conditions,
        },
    }
