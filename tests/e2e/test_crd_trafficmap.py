"""The TrafficMap CRD's rules, as the real API server applies them.

OME v1.3's TrafficMap schema tried against kube-apiserver: list maps and sets, bounds,
enums, the capacity source's default, every field the routing controller writes kept as
written, and the status fields that the publisher writes through the status subresource.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from crd_helpers import apply, assert_applied, get

from ome_routing_dev.devcluster import LocalControlPlane

DIGEST = "sha256:" + "0a" * 32


# --- helpers ------------------------------------------------------------------------------


def a_trafficmap(namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"service": "svc", **spec},
    }


def an_entry(cluster: str = "worker-a", **fields: Any) -> dict[str, Any]:
    return {"cluster": cluster, "weight": 1, "healthy": True, **fields}


def patch_status(
    plane: LocalControlPlane, namespace: str, status: dict[str, Any]
) -> tuple[int, str]:
    result = plane.kubectl(
        "patch", "trafficmap", "svc", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": status}), check=False,
    )  # fmt: skip
    return result.returncode, result.stdout + result.stderr


# --- TrafficMap ---------------------------------------------------------------------------


def test_traffic_maps_answer_to_their_short_names_and_print_their_columns(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    control_plane.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(a_trafficmap(namespace, mode="All"))
    )
    for name in ("trafficmap", "tm", "tmap"):
        header = control_plane.kubectl("get", name, "-n", namespace).stdout.splitlines()[0].split()
        assert header == ["NAME", "MODE", "PUBLISHED", "ROUTABLE", "OVERRIDE", "REASON", "AGE"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"service": None}, "spec.service: Required value", id="no-service"),
        pytest.param(
            {"entries": [an_entry(), an_entry()]},
            'spec.entries[1]: Duplicate value: {"cluster":"worker-a"}',
            id="duplicate-cluster",
        ),
        pytest.param(
            {"entries": [{"weight": 1}]}, "spec.entries[0].cluster: Required value", id="no-cluster"
        ),
        pytest.param(
            {"entries": [an_entry(weight=1000001)]},
            "spec.entries[0].weight in body should be less than or equal to 1000000",
            id="weight-over",
        ),
        pytest.param(
            {"entries": [an_entry(weight=-1)]},
            "spec.entries[0].weight in body should be greater than or equal to 0",
            id="weight-negative",
        ),
        pytest.param(
            {"entries": [an_entry(capacity={"reported": -1})]},
            "spec.entries[0].capacity.reported in body should be greater than or equal to 0",
            id="reported-negative",
        ),
        pytest.param(
            {"entries": [an_entry(capacity={"source": "Reporter"})]},
            'spec.entries[0].capacity.source: Unsupported value: "Reporter": supported values: '
            '"ControlPlane", "Endpoint"',
            id="source",
        ),
        pytest.param(
            {"entries": [an_entry(drainRefs=["a", "a"])]},
            'spec.entries[0].drainRefs[1]: Duplicate value: "a"',
            id="drainRefs-set",
        ),
        pytest.param(
            {"mode": "Everywhere"},
            'spec.mode: Unsupported value: "Everywhere"',
            id="mode",
        ),
        pytest.param(
            {"entries": [an_entry(probe={"policyDigest": "sha256:ABC"})]},
            "spec.entries[0].probe.policyDigest in body should match",
            id="probe-digest",
        ),
        pytest.param(
            {"entries": [an_entry(probe={"result": "Flaky"})]},
            'spec.entries[0].probe.result: Unsupported value: "Flaky": supported values: '
            '"Passing", "Failing", "Unknown"',
            id="probe-result",
        ),
        pytest.param(
            {"entries": [an_entry(probe={"consecutiveFailures": -1})]},
            "spec.entries[0].probe.consecutiveFailures in body should be greater than or equal to 0",
            id="probe-failures",
        ),
        pytest.param(
            {"entries": [an_entry(probe={"lastProbeTime": "yesterday"})]},
            "spec.entries[0].probe.lastProbeTime",
            id="probe-time",
        ),
    ],
)
def test_the_api_server_refuses_a_broken_traffic_map(
    control_plane: LocalControlPlane, namespace: str, spec: dict[str, Any], message: str
) -> None:
    body = a_trafficmap(namespace, **spec)
    body["spec"] = {k: v for k, v in body["spec"].items() if v is not None}
    code, output = apply(control_plane, body)
    assert code != 0
    assert message in output


def test_a_traffic_map_keeps_every_field_that_ome_writes(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    probe = {
        "policyDigest": DIGEST,
        "result": "Failing",
        "gated": True,
        "lastProbeTime": "2026-09-28T10:00:00Z",
        "consecutiveFailures": 3,
        "message": "HTTP 503",
    }
    entry = an_entry(
        endpoint="http://svc.worker-a.example.com",
        weight=1000000,
        capacity={
            "allocated": 2,
            "ready": 2,
            "factor": "1.5",
            "source": "Endpoint",
            "reported": 0,
            "fallbackReason": "capacity endpoint returned HTTP 404",
        },
        probe=probe,
        drainRefs=["maintenance-a", "rack-b"],
    )
    spec = {
        "service": "svc",
        "placementPlanID": "plan-7",
        "mode": "SplitByCapacity",
        "observedISVCGeneration": 4,
        "entries": [entry, an_entry("worker-b", weight=0, healthy=False)],
    }
    assert_applied(*apply(control_plane, a_trafficmap(namespace, **spec)))
    stored = get(control_plane, "trafficmap", namespace)["spec"]
    assert stored == spec


def test_a_capacity_without_source_defaults_to_control_plane(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    entries = [an_entry(capacity={"allocated": 2}), an_entry("worker-b")]
    assert_applied(*apply(control_plane, a_trafficmap(namespace, entries=entries)))
    stored = get(control_plane, "trafficmap", namespace)["spec"]
    assert "mode" not in stored
    assert stored["entries"][0]["capacity"] == {"allocated": 2, "source": "ControlPlane"}
    assert "capacity" not in stored["entries"][1]


def test_a_traffic_map_status_keeps_what_the_publisher_writes(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    assert_applied(*apply(control_plane, a_trafficmap(namespace)))
    status = {
        "sourceUID": "2f6c1d9e-4b7a-4c1e-9f3d-8a5b6c7d0e12",
        "published": True,
        "gatewayRef": {
            "group": "gateway.networking.k8s.io",
            "kind": "HTTPRoute",
            "name": "svc-global",
            "namespace": namespace,
        },
        "observedTrafficMapGeneration": 1,
        "publisher": {
            "publisherName": "gatewayapi",
            "claimedTargets": [f"v1:httproute:{namespace}/svc-global"],
            "observedOptionsDigest": DIGEST,
            "lastPositive": {
                "trafficMapGeneration": 1,
                "observedISVCGeneration": 1,
                "planCompatibilityDigest": DIGEST,
                "targets": [{"target": "t1", "weight": 3}, {"target": "t2", "weight": 0}],
            },
        },
        "conditions": [
            {
                "type": "Published",
                "status": "True",
                "reason": "Published",
                "message": 'TrafficMap is published by publisher "gatewayapi"',
                "observedGeneration": 1,
                "lastTransitionTime": "2026-09-28T10:00:00Z",
            }
        ],
    }
    code, output = patch_status(control_plane, namespace, status)
    assert code == 0, output
    assert get(control_plane, "trafficmap", namespace)["status"] == status


def a_condition(type_: str = "Routable", **fields: Any) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": "Routable",
        "message": "2 home(s) serving",
        "lastTransitionTime": "2026-09-28T10:00:00Z",
        **fields,
    }


@pytest.mark.parametrize(
    ("status", "message"),
    [
        pytest.param(
            {"conditions": [a_condition(), a_condition()]},
            'status.conditions[1]: Duplicate value: {"type":"Routable"}',
            id="duplicate-condition",
        ),
        pytest.param(
            {"conditions": [a_condition(reason="")]},
            'status.conditions[0].reason: Invalid value: "": '
            "conditions[0].reason in body should be at least 1 chars long",
            id="condition-reason-empty",
        ),
        pytest.param(
            {"gatewayRef": {"name": "svc-global"}},
            "status.gatewayRef.kind: Required value",
            id="gatewayRef-kind",
        ),
        pytest.param(
            {"publisher": {"claimedTargets": ["t"]}},
            "status.publisher.publisherName: Required value",
            id="publisherName",
        ),
        pytest.param(
            {"publisher": {"publisherName": "p" * 129}},
            "status.publisher.publisherName: Too long",
            id="publisherName-long",
        ),
        pytest.param(
            {"publisher": {"publisherName": "gatewayapi", "claimedTargets": ["t", "t"]}},
            'status.publisher.claimedTargets[1]: Duplicate value: "t"',
            id="claimedTargets-set",
        ),
        pytest.param(
            {"publisher": {"publisherName": "gatewayapi", "observedOptionsDigest": "md5:00"}},
            'status.publisher.observedOptionsDigest: Invalid value: "md5:00": '
            "publisher.observedOptionsDigest in body should match '^sha256:[0-9a-f]{64}$'",
            id="options-digest",
        ),
        pytest.param(
            {
                "publisher": {
                    "publisherName": "gatewayapi",
                    "lastPositive": {
                        "trafficMapGeneration": 0,
                        "observedISVCGeneration": 1,
                        "planCompatibilityDigest": DIGEST,
                        "targets": [{"target": "t", "weight": 1}],
                    },
                }
            },
            "status.publisher.lastPositive.trafficMapGeneration: Invalid value: 0: "
            "publisher.lastPositive.trafficMapGeneration in body should be greater than or equal to 1",
            id="lastPositive-generation",
        ),
        pytest.param(
            {
                "publisher": {
                    "publisherName": "gatewayapi",
                    "lastPositive": {
                        "trafficMapGeneration": 1,
                        "observedISVCGeneration": 1,
                        "planCompatibilityDigest": DIGEST,
                        "targets": [{"target": "t", "weight": 1}, {"target": "t", "weight": 2}],
                    },
                }
            },
            "status.publisher.lastPositive.targets[1]: Duplicate value",
            id="lastPositive-targets-map",
        ),
    ],
)
def test_the_api_server_refuses_a_broken_traffic_map_status(
    control_plane: LocalControlPlane, namespace: str, status: dict[str, Any], message: str
) -> None:
    assert_applied(*apply(control_plane, a_trafficmap(namespace)))
    code, output = patch_status(control_plane, namespace, status)
    assert code != 0
    assert message in output
