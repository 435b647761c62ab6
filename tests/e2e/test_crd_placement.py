"""The InferenceService's `spec.placement` and `status.placement`, as the real API server applies them.

`spec.placement` has OME v1.3's schema (`placement_types.go`, `cluster_affinity_types.go`):
an explicit `policy: ClusterAffinity` and `mode`, the affinity terms' limits and CEL rule,
`maxSurge`, `replacementTimeout` (Single only, positive) and `split`. `status.placement`
keeps the accepted plan and every field of a candidate's allocation, which routing reads.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from crd_helpers import apply, assert_applied, get

from ome_routing_dev.devcluster import LocalControlPlane

TERM_RULE = "a cluster affinity term must contain a requirement"
SINGLE_ONLY = "replacementTimeout requires ClusterAffinity Single placement"
POSITIVE = "replacementTimeout must be a positive duration"
BY_NAME = {"key": "metadata.name", "operator": "In", "values": ["worker-a", "worker-b"]}
GPU = {"key": "ome.io/accelerator", "operator": "Exists"}


def an_isvc(namespace: str, placement: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"model": {"name": "svc"}, "placement": placement},
    }


def placed(mode: str = "All", **fields: Any) -> dict[str, Any]:
    return {"policy": "ClusterAffinity", "mode": mode, **fields}


def terms(*term: dict[str, Any]) -> dict[str, Any]:
    return {"clusterAffinity": list(term)}


# --- spec.placement -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        pytest.param({"mode": "All"}, "spec.placement.policy: Required value", id="no-policy"),
        pytest.param(
            {"policy": "ClusterAffinity"}, "spec.placement.mode: Required value", id="no-mode"
        ),
        pytest.param(
            {"policy": "Legacy", "mode": "All"},
            'spec.placement.policy: Unsupported value: "Legacy": supported values: '
            '"ClusterAffinity"',
            id="policy-legacy",
        ),
        pytest.param(
            placed("Spread"),
            'spec.placement.mode: Unsupported value: "Spread": supported values: "Single", '
            '"All", "Split", "SplitByCapacity"',
            id="mode-unknown",
        ),
        pytest.param(placed(**terms({})), TERM_RULE, id="empty-term"),
        pytest.param(placed("Split", **terms({"weight": 2})), TERM_RULE, id="weight-only-term"),
        pytest.param(
            placed(**terms({"matchExpressions": [], "matchFields": []})),
            TERM_RULE,
            id="empty-requirement-lists",
        ),
        pytest.param(
            placed(clusterAffinity=[]),
            "spec.placement.clusterAffinity in body should have at least 1 items",
            id="no-terms",
        ),
        pytest.param(
            placed(clusterAffinity=[{"matchFields": [BY_NAME]}] * 65),
            "spec.placement.clusterAffinity: Too many: 65: must have at most 64 items",
            id="65-terms",
        ),
        pytest.param(
            placed(**terms({"matchExpressions": [GPU] * 65})),
            "spec.placement.clusterAffinity[0].matchExpressions: Too many: 65: must have at "
            "most 64 items",
            id="65-requirements",
        ),
        pytest.param(
            placed(**terms({"matchFields": [{**BY_NAME, "values": ["w"] * 65}]})),
            "spec.placement.clusterAffinity[0].matchFields[0].values: Too many: 65: must have "
            "at most 64 items",
            id="65-values",
        ),
        pytest.param(
            placed(**terms({"matchExpressions": [{**GPU, "operator": "Has"}]})),
            "spec.placement.clusterAffinity[0].matchExpressions[0].operator: Unsupported value: "
            '"Has"',
            id="operator",
        ),
        pytest.param(
            placed(**terms({"matchExpressions": [{**GPU, "key": ""}]})),
            "spec.placement.clusterAffinity[0].matchExpressions[0].key in body should be at "
            "least 1 chars long",
            id="empty-key",
        ),
        pytest.param(
            placed(**terms({"matchFields": [{"key": "metadata.name", "values": ["w"]}]})),
            "spec.placement.clusterAffinity[0].matchFields[0].operator: Required value",
            id="no-operator",
        ),
        pytest.param(
            placed("Split", **terms({"weight": 0, "matchFields": [BY_NAME]})),
            "spec.placement.clusterAffinity[0].weight in body should be greater than or equal to 1",
            id="weight-0",
        ),
        pytest.param(
            placed(maxSurge=-1),
            "spec.placement.maxSurge in body should be greater than or equal to 0",
            id="maxSurge-negative",
        ),
        pytest.param(placed("All", replacementTimeout="90s"), SINGLE_ONLY, id="timeout-all"),
        pytest.param(
            placed("SplitByCapacity", replacementTimeout="90s"),
            SINGLE_ONLY,
            id="timeout-split-by-capacity",
        ),
        pytest.param(placed("Single", replacementTimeout="0s"), POSITIVE, id="timeout-zero"),
        pytest.param(placed("Single", replacementTimeout="-5m"), POSITIVE, id="timeout-negative"),
        pytest.param(
            placed("Split", split={"replicas": 0}),
            "spec.placement.split.replicas in body should be greater than or equal to 1",
            id="split-replicas-0",
        ),
        pytest.param(
            placed("Split", split={"maxReplicasPerCluster": -1}),
            "spec.placement.split.maxReplicasPerCluster in body should be greater than or "
            "equal to 0",
            id="split-ceiling-negative",
        ),
        # Gone from OME v1.3's schema: restrictions are clusterAffinity terms now.
        pytest.param(
            placed(requirements="ome.io/accelerator=h100"),
            'unknown field "spec.placement.requirements"',
            id="legacy-requirements",
        ),
        pytest.param(
            placed(clusterSelector="region=us"),
            'unknown field "spec.placement.clusterSelector"',
            id="legacy-clusterSelector",
        ),
    ],
)
def test_the_api_server_refuses_a_placement_omes_schema_refuses(
    control_plane: LocalControlPlane, namespace: str, placement: dict[str, Any], message: str
) -> None:
    code, output = apply(control_plane, an_isvc(namespace, placement))
    assert code != 0
    assert message in output


ACCEPTED = [
    pytest.param(placed("All"), id="all-everywhere"),
    pytest.param(placed("All", **terms({"matchFields": [BY_NAME]})), id="all-by-name"),
    pytest.param(
        placed(
            "Single", maxSurge=1, replacementTimeout="1m30s", **terms({"matchExpressions": [GPU]})
        ),
        id="single-move",
    ),
    pytest.param(
        placed(
            "Split",
            split={"replicas": 6, "maxReplicasPerCluster": 4},
            **terms(
                {"weight": 2, "matchFields": [{**BY_NAME, "values": ["worker-a"]}]},
                {"matchFields": [{**BY_NAME, "values": ["worker-b"]}]},
            ),
        ),
        id="split-weighted",
    ),
    pytest.param(
        # `selector_test.go@8263d0c7`: weights are replica ratios, with no upper bound
        placed(
            "Split",
            **terms(
                {"weight": 400, "matchFields": [{**BY_NAME, "values": ["worker-a"]}]},
                {"weight": 168, "matchFields": [{**BY_NAME, "values": ["worker-b"]}]},
            ),
        ),
        id="split-weights-400-and-168",
    ),
    pytest.param(placed("SplitByCapacity", split={"replicas": 4}), id="split-by-capacity"),
    pytest.param(placed("Split", maxSurge=0, split={"maxReplicasPerCluster": 0}), id="zeros"),
    pytest.param(placed(**terms({"matchExpressions": [GPU] * 64})), id="64-requirements"),
    pytest.param(placed(clusterAffinity=None), id="null-terms"),
]


@pytest.mark.parametrize("placement", ACCEPTED)
def test_the_api_server_accepts_and_keeps_a_placement_within_omes_schema(
    control_plane: LocalControlPlane, namespace: str, placement: dict[str, Any]
) -> None:
    assert_applied(*apply(control_plane, an_isvc(namespace, placement)))
    stored = get(control_plane, "inferenceservice", namespace)
    expected = {k: v for k, v in placement.items() if v is not None}
    assert {k: v for k, v in stored["spec"]["placement"].items() if v is not None} == expected


# --- status.placement -----------------------------------------------------------------------

HOME = {
    "inputDigest": "sha256:home",
    "replicaFloors": [
        {"component": "engine", "replicas": 2},
        {"component": "router", "replicas": 1},
    ],
}
PLAN = {
    "id": "plan-7f3a",
    "mode": "Single",
    "winner": "worker-a",
    "singleMove": {"selected": "worker-b", "cursor": "worker-b"},
    "adoptionDigest": "sha256:adoption",
    "revision": 4,
    "sourceUID": "2f6c1d9e-4b7a-4c1e-9f3d-8a5b6c7d0e12",
    "observedGeneration": 3,
    "inputDigest": "sha256:inputs",
    "pauseSurge": True,
    "requestedReplicas": 2,
    "assignedReplicas": 2,
    "unassignedReplicas": 0,
    "originalUnassignedReplicas": 0,
}
ALLOCATION = {
    "clusterUID": "registration-a",
    "inventoryPending": True,
    "homeInputsPending": True,
    "raceCandidate": True,
    "replacementStartedAt": "2026-09-28T10:00:00.123456Z",
    "matched": True,
    "currentHome": HOME,
    "desiredHome": HOME,
    "matchingTerms": [0, 2],
    "weight": 3,
    "capacity": {
        "demandFingerprint": "demand-a",
        "demandContract": {"fingerprint": "f" * 64, "components": [{"component": "engine"}]},
        "replicas": 4,
        "pools": [
            {
                "resourceName": "nvidia.com/gpu",
                "resourceFlavor": "gpu-a",
                "demand": 2,
                "allocatable": 8,
                "observedAt": "2026-09-28T10:00:00Z",
                "reportUID": "report-a",
                "reportResourceVersion": "1",
                "attribution": {"flavorUID": "flavor-a", "complete": True},
            }
        ],
    },
    "originalReplicas": 2,
    "currentReplicas": 0,
    "desiredReplicas": 2,
    "drainRequested": True,
}


def test_the_accepted_plan_and_every_allocation_field_are_kept(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    assert_applied(*apply(control_plane, an_isvc(namespace, placed("Single"))))
    placement = {
        "phase": "Placed",
        "cluster": "worker-a",
        "endpoint": "http://svc.worker-a.example.com",
        "plan": PLAN,
        "candidates": [
            {
                "cluster": "worker-a",
                "phase": "Admitted",
                "endpoint": "http://svc.worker-a.example.com",
                "admittedReplicas": 2,
                "readyReplicas": 2,
                "appliedPlanID": "plan-7f3a",
                "observationKnown": True,
                "observationFailingSince": "2026-09-28T10:00:00Z",
                "allocation": ALLOCATION,
            },
            {"cluster": "worker-b", "phase": "Admitting", "allocation": {"currentReplicas": 0}},
        ],
    }
    control_plane.kubectl(
        "patch", "inferenceservice", "svc", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"placement": placement}}),
    )  # fmt: skip
    stored = get(control_plane, "inferenceservice", namespace)
    assert stored["status"]["placement"] == placement


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        pytest.param(
            {"plan": {"id": "p", "revision": 0}},
            "placement.plan.revision in body should be greater than or equal to 1",
            id="revision-0",
        ),
        pytest.param(
            {"plan": {"id": "p", "mode": "Spread"}},
            'status.placement.plan.mode: Unsupported value: "Spread"',
            id="plan-mode",
        ),
        pytest.param(
            {"candidates": [{"cluster": "a", "allocation": {"currentReplicas": -1}}]},
            "placement.candidates[0].allocation.currentReplicas in body should be greater than "
            "or equal to 0",
            id="negative-replicas",
        ),
        pytest.param(
            {"candidates": [{"cluster": "a", "allocation": {"drainRequested": "yes"}}]},
            "placement.candidates[0].allocation.drainRequested in body must be of type boolean",
            id="drain-not-bool",
        ),
        pytest.param(
            {"candidates": [{"cluster": "a"}, {"cluster": "a"}]},
            'status.placement.candidates[1]: Duplicate value: {"cluster":"a"}',
            id="duplicate-cluster",
        ),
    ],
)
def test_the_api_server_refuses_a_placement_status_of_the_wrong_type(
    control_plane: LocalControlPlane, namespace: str, placement: dict[str, Any], message: str
) -> None:
    assert_applied(*apply(control_plane, an_isvc(namespace, placed("Single"))))
    result = control_plane.kubectl(
        "patch", "inferenceservice", "svc", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"placement": placement}}), check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert message in result.stderr
