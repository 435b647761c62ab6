"""The CRDs' own rules, as the real API server applies them to `kubectl apply`.

Each rule of OME v1.3's schemas is tried here against kube-apiserver: the capacity poll's
markers and CEL rules, the publisher options' bounds, the TrafficMap's list markers,
bounds, enum and default, and the status fields that the publisher writes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from ome_routing.devcluster import LocalControlPlane

POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 4,
    "quorum": 3,
    "period": "10s",
    "timeout": "3s",
    "maxAge": "40s",
}
ENABLED = (
    "an enabled capacity poll must specify path, method, format, period, timeout, samples, "
    "quorum, and maxAge"
)
DISABLED = "disabled must not be combined with capacity configuration fields"
OPTIONS = (
    "publisher option keys must contain 1-128 characters and values must contain 1-4096 characters"
)
DIGEST = "sha256:" + "0a" * 32


# --- helpers ------------------------------------------------------------------------------


def apply(plane: LocalControlPlane, manifest: dict[str, Any]) -> tuple[int, str]:
    result = plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    return result.returncode, result.stdout + result.stderr


def an_isvc(namespace: str, routing: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"placement": {"mode": "All"}, "routing": routing},
    }


def apply_poll(
    plane: LocalControlPlane, namespace: str, capacity: dict[str, Any]
) -> tuple[int, str]:
    return apply(plane, an_isvc(namespace, {"capacity": capacity}))


def a_trafficmap(namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"service": "svc", **spec},
    }


def an_entry(cluster: str = "worker-a", **fields: Any) -> dict[str, Any]:
    return {"cluster": cluster, "weight": 1, "healthy": True, **fields}


def get(plane: LocalControlPlane, kind: str, namespace: str) -> dict[str, Any]:
    out = plane.kubectl("get", kind, "svc", "-n", namespace, "-o", "json").stdout
    loaded: dict[str, Any] = json.loads(out)
    return loaded


def patch_status(
    plane: LocalControlPlane, namespace: str, status: dict[str, Any]
) -> tuple[int, str]:
    result = plane.kubectl(
        "patch", "trafficmap", "svc", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": status}), check=False,
    )  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def assert_applied(code: int, output: str) -> None:
    assert code == 0, output
    assert output.strip().endswith(("created", "configured", "unchanged")), output


# --- InferenceService spec.routing.capacity -------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        pytest.param({"path": "/capacity", "method": "GET"}, ENABLED, id="incomplete"),
        pytest.param({}, ENABLED, id="empty"),
        pytest.param({"disabled": False}, ENABLED, id="disabled-false-counts-as-enabled"),
        pytest.param({**POLL, "disabled": False, "maxAge": None}, ENABLED, id="no-maxAge"),
        pytest.param({"disabled": True, "path": "/capacity"}, DISABLED, id="disabled-and-path"),
        pytest.param(
            {"disabled": True, "options": {"a": "b"}}, DISABLED, id="disabled-and-options"
        ),
        pytest.param({**POLL, "samples": 2}, "quorum must not exceed samples", id="quorum"),
        pytest.param({**POLL, "maxAge": "5s"}, "maxAge must be at least period", id="maxAge"),
        pytest.param({**POLL, "maxAge": "-40s"}, "maxAge must be at least period", id="maxAge-neg"),
        pytest.param(
            {**POLL, "timeout": "10s"}, "timeout must be shorter than period", id="timeout-eq"
        ),
        pytest.param({**POLL, "timeout": "0s"}, "timeout must be positive", id="timeout-zero"),
        pytest.param({**POLL, "timeout": "-3s"}, "timeout must be positive", id="timeout-neg"),
        pytest.param({**POLL, "period": "0s"}, "period must be positive", id="period-zero"),
        pytest.param({**POLL, "period": "10"}, "spec.routing.capacity", id="period-unitless"),
        pytest.param(
            {**POLL, "path": "capacity"},
            "spec.routing.capacity.path in body should match '^/'",
            id="path-pattern",
        ),
        pytest.param(
            {**POLL, "path": ""},
            "spec.routing.capacity.path in body should be at least 1 chars long",
            id="path-empty",
        ),
        pytest.param(
            {**POLL, "format": ""},
            "spec.routing.capacity.format in body should be at least 1 chars long",
            id="format-empty",
        ),
        pytest.param(
            {**POLL, "method": "PUT"},
            'spec.routing.capacity.method: Unsupported value: "PUT": supported values: '
            '"GET", "HEAD", "POST"',
            id="method",
        ),
        pytest.param(
            {**POLL, "samples": 0},
            "spec.routing.capacity.samples in body should be greater than or equal to 1",
            id="samples-0",
        ),
        pytest.param(
            {**POLL, "quorum": 0},
            "spec.routing.capacity.quorum in body should be greater than or equal to 1",
            id="quorum-0",
        ),
        pytest.param(
            {**POLL, "options": {"window": 3}},
            "spec.routing.capacity.options.window in body must be of type string",
            id="options-not-string",
        ),
    ],
)
def test_the_api_server_refuses_a_broken_poll(
    control_plane: LocalControlPlane, namespace: str, capacity: dict[str, Any], message: str
) -> None:
    capacity = {k: v for k, v in capacity.items() if v is not None}
    code, output = apply_poll(control_plane, namespace, capacity)
    assert code != 0
    assert message in output


@pytest.mark.parametrize(
    "capacity",
    [
        pytest.param(POLL, id="spec-poll"),
        pytest.param({"disabled": True}, id="disabled"),
        pytest.param({**POLL, "disabled": False}, id="disabled-false-with-every-field"),
        pytest.param({**POLL, "method": "HEAD"}, id="head"),
        pytest.param({**POLL, "method": "POST"}, id="post"),
        pytest.param(
            {**POLL, "period": "1m30s", "timeout": "1.5s", "maxAge": "1m30s"}, id="go-durations"
        ),
        pytest.param({**POLL, "quorum": 4}, id="quorum-equals-samples"),
        pytest.param({**POLL, "maxAge": "10s", "quorum": 1}, id="maxAge-equals-period"),
        # Mistakes the controller refuses later, as the specification says the API server accepts them:
        pytest.param({**POLL, "maxAge": "20s"}, id="maxAge-short"),
        pytest.param({**POLL, "format": "report"}, id="format-case"),
        pytest.param(
            {**POLL, "period": "500ms", "timeout": "100ms", "maxAge": "2s"}, id="period-short"
        ),
        pytest.param({**POLL, "samples": 200}, id="samples-many"),
        pytest.param({**POLL, "options": {"window": "3"}}, id="options-for-report"),
    ],
)
def test_the_api_server_accepts_what_the_specification_says_it_does(
    control_plane: LocalControlPlane, namespace: str, capacity: dict[str, Any]
) -> None:
    assert_applied(*apply_poll(control_plane, namespace, capacity))


def test_a_poll_is_stored_as_written(control_plane: LocalControlPlane, namespace: str) -> None:
    poll = {**POLL, "options": {"window": "3"}}
    assert_applied(*apply_poll(control_plane, namespace, poll))
    stored = get(control_plane, "inferenceservice", namespace)
    assert stored["spec"]["routing"]["capacity"] == poll


# --- InferenceService spec.routing, other fields --------------------------------------------


@pytest.mark.parametrize(
    ("routing", "message"),
    [
        pytest.param(
            {"publisher": {"options": {f"k{i}": "v" for i in range(33)}}},
            "spec.routing.publisher.options: Too many: 33: must have at most 32 items",
            id="33-options",
        ),
        pytest.param({"publisher": {"options": {"k": ""}}}, OPTIONS, id="empty-value"),
        pytest.param({"publisher": {"options": {"k" * 129: "v"}}}, OPTIONS, id="key-129"),
        pytest.param({"publisher": {"options": {"k": "v" * 4097}}}, OPTIONS, id="value-4097"),
        pytest.param(
            {"publisher": {"options": {"k": 1}}},
            "spec.routing.publisher.options.k in body must be of type string",
            id="value-not-string",
        ),
        pytest.param(
            {"capacityFactors": {"worker-a": "fast"}},
            "spec.routing.capacityFactors.worker-a",
            id="factor-not-quantity",
        ),
        pytest.param(
            {"enabled": "yes"},
            "spec.routing.enabled in body must be of type boolean",
            id="enabled-not-bool",
        ),
    ],
)
def test_the_api_server_refuses_broken_routing_fields(
    control_plane: LocalControlPlane, namespace: str, routing: dict[str, Any], message: str
) -> None:
    code, output = apply(control_plane, an_isvc(namespace, routing))
    assert code != 0
    assert message in output


@pytest.mark.parametrize(
    "routing",
    [
        pytest.param(
            {"publisher": {"options": {f"k{i}": "v" for i in range(32)}}}, id="32-options"
        ),
        pytest.param({"publisher": {"options": {"k" * 128: "v" * 4096}}}, id="longest-option"),
        pytest.param({"capacityFactors": {"worker-a": "1.5", "worker-b": 2}}, id="factors"),
        # Only the controller checks that a factor is positive, as in OME.
        pytest.param({"capacityFactors": {"worker-a": "0"}}, id="factor-zero"),
        pytest.param({"enabled": False}, id="opt-out"),
    ],
)
def test_the_api_server_accepts_routing_fields_within_omes_bounds(
    control_plane: LocalControlPlane, namespace: str, routing: dict[str, Any]
) -> None:
    assert_applied(*apply(control_plane, an_isvc(namespace, routing)))


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


def test_workload_clusters_answer_to_wlc_and_print_reachable(
    control_plane: LocalControlPlane,
) -> None:
    cluster = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "WorkloadCluster",
        "metadata": {"name": "crd-columns"},
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(cluster))
    try:
        header = control_plane.kubectl("get", "wlc", "crd-columns").stdout.splitlines()
        assert header[0].split() == ["NAME", "REACHABLE", "AGE"]
    finally:
        control_plane.kubectl("delete", "wlc", "crd-columns", "--wait=false")


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
