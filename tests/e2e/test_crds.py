"""The InferenceService and WorkloadCluster CRDs' rules, as the real API server applies them.

Each rule of OME v1.3's `spec.routing` schema is tried against kube-apiserver with
`kubectl apply`: the capacity poll's markers and CEL rules (with the mistakes the
specification says the API server accepts), and the publisher options' bounds; then the
WorkloadCluster's typed spec (exactly one cluster source) and status. `spec.placement` and
`status.placement` are in test_crd_placement.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from crd_helpers import apply, assert_applied, get

from ome_routing_dev.devcluster import LocalControlPlane

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

# --- helpers ------------------------------------------------------------------------------


def an_isvc(namespace: str, routing: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"placement": {"policy": "ClusterAffinity", "mode": "All"}, "routing": routing},
    }


def apply_poll(
    plane: LocalControlPlane, namespace: str, capacity: dict[str, Any]
) -> tuple[int, str]:
    return apply(plane, an_isvc(namespace, {"capacity": capacity}))


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
        pytest.param(
            {**POLL, "period": "10"},
            "evaluating rule: period must be positive",
            id="period-unitless",
        ),
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


# --- WorkloadCluster ----------------------------------------------------------------------

SOURCE_RULE = "exactly one of kubeConfig or clusterProfileRef must be set"
KUBECONFIG = {"secretRef": {"name": "worker-a-kubeconfig", "namespace": "ome"}}


@pytest.fixture
def cluster(control_plane: LocalControlPlane, namespace: str) -> Iterator[str]:
    """A WorkloadCluster name for one test (cluster-scoped), deleted afterwards."""
    name = f"wlc-{namespace}"
    yield name
    control_plane.kubectl("delete", "wlc", name, "--ignore-not-found", "--wait=false")


def a_cluster(name: str, spec: dict[str, Any] | None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "WorkloadCluster",
        "metadata": {"name": name},
    }
    if spec is not None:
        manifest["spec"] = spec
    return manifest


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({}, "spec.clusterSource: Required value", id="no-clusterSource"),
        pytest.param({"clusterSource": {}}, SOURCE_RULE, id="no-source"),
        pytest.param(
            {"clusterSource": {"kubeConfig": KUBECONFIG, "clusterProfileRef": {"name": "p"}}},
            SOURCE_RULE,
            id="both-sources",
        ),
        pytest.param(
            {"clusterSource": {"kubeConfig": {"key": "config"}}},
            "spec.clusterSource.kubeConfig.secretRef: Required value",
            id="kubeConfig-without-secretRef",
        ),
        pytest.param(
            {"clusterSource": {"clusterProfileRef": {}}},
            "spec.clusterSource.clusterProfileRef.name: Required value",
            id="clusterProfileRef-without-name",
        ),
        pytest.param(
            {"clusterSource": {"kubeConfig": {"secretRef": {"name": 7}}}},
            "spec.clusterSource.kubeConfig.secretRef.name in body must be of type string",
            id="secret-name-not-string",
        ),
    ],
)
def test_the_api_server_refuses_a_workload_cluster_without_exactly_one_source(
    control_plane: LocalControlPlane, cluster: str, spec: dict[str, Any], message: str
) -> None:
    code, output = apply(control_plane, a_cluster(cluster, spec))
    assert code != 0
    assert message in output


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"clusterSource": {"kubeConfig": KUBECONFIG}}, id="kubeConfig"),
        pytest.param(
            {"clusterSource": {"kubeConfig": {**KUBECONFIG, "key": "value"}}}, id="kubeConfig-key"
        ),
        pytest.param({"clusterSource": {"clusterProfileRef": {"name": "p"}}}, id="profile"),
        # OME's spec is optional as a whole; only a spec without a source is refused.
        pytest.param(None, id="no-spec"),
    ],
)
def test_the_api_server_accepts_a_workload_cluster_with_one_source(
    control_plane: LocalControlPlane, cluster: str, spec: dict[str, Any] | None
) -> None:
    assert_applied(*apply(control_plane, a_cluster(cluster, spec)))


def test_the_kubeconfig_key_defaults_to_kubeconfig(
    control_plane: LocalControlPlane, cluster: str
) -> None:
    assert_applied(
        *apply(control_plane, a_cluster(cluster, {"clusterSource": {"kubeConfig": KUBECONFIG}}))
    )
    stored = json.loads(control_plane.kubectl("get", "wlc", cluster, "-o", "json").stdout)
    assert stored["spec"]["clusterSource"] == {"kubeConfig": {**KUBECONFIG, "key": "kubeconfig"}}


def test_workload_clusters_answer_to_wlc_and_print_reachable(
    control_plane: LocalControlPlane, cluster: str
) -> None:
    assert_applied(
        *apply(control_plane, a_cluster(cluster, {"clusterSource": {"kubeConfig": KUBECONFIG}}))
    )
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "Reachable",
        "message": "",
        "lastTransitionTime": "2026-09-28T10:00:00Z",
    }
    control_plane.kubectl(
        "patch", "wlc", cluster, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"conditions": [ready]}}),
    )  # fmt: skip
    lines = control_plane.kubectl("get", "wlc", cluster).stdout.splitlines()
    assert lines[0].split() == ["NAME", "REACHABLE", "AGE"]
    assert lines[1].split()[:2] == [cluster, "True"]


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        pytest.param(
            {"type": "Ready", "status": "True"},
            "status.conditions[0].reason: Required value",
            id="no-reason",
        ),
        pytest.param(
            {
                "type": "Ready",
                "status": "Yes",
                "reason": "Reachable",
                "message": "",
                "lastTransitionTime": "2026-09-28T10:00:00Z",
            },
            'status.conditions[0].status: Unsupported value: "Yes"',
            id="status-not-enum",
        ),
    ],
)
def test_workload_cluster_conditions_are_metav1_conditions(
    control_plane: LocalControlPlane, cluster: str, condition: dict[str, Any], message: str
) -> None:
    assert_applied(
        *apply(control_plane, a_cluster(cluster, {"clusterSource": {"kubeConfig": KUBECONFIG}}))
    )
    result = control_plane.kubectl(
        "patch", "wlc", cluster, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"conditions": [condition]}}), check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert message in result.stderr
