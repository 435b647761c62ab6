"""The CRDs that the chart installs have OME v1.3's shape: columns, types, markers, messages.

What the API server does with these markers is tried in tests/e2e/test_crds.py; here the
rendered schemas are read path by path, so that a marker cannot go missing unnoticed
where no e2e case exercises it.
"""

from __future__ import annotations

from typing import Any

import pytest
from chart_helpers import Render

INT32 = {"type": "integer", "format": "int32"}
INT64 = {"type": "integer", "format": "int64"}
DIGEST = "^sha256:[0-9a-f]{64}$"


def crd(render: Render, name: str) -> dict[str, Any]:
    docs = [d for d in render() if d["kind"] == "CustomResourceDefinition"]
    (found,) = [d for d in docs if d["metadata"]["name"] == name]
    return found


def version(definition: dict[str, Any]) -> dict[str, Any]:
    (only,) = definition["spec"]["versions"]
    assert only["name"] == "v1beta1"
    return dict(only)


def schema_at(definition: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema of a dotted path; `[]` steps into a list's items."""
    node: dict[str, Any] = version(definition)["schema"]["openAPIV3Schema"]
    for step in path.split("."):
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


def required_at(definition: dict[str, Any], path: str) -> list[str]:
    return list(schema_at(definition, path).get("required", []))


# --- TrafficMap ---------------------------------------------------------------------------

#: Every path of OME's TrafficMap table, with the markers its schema must carry.
TRAFFICMAP_PATHS: list[tuple[str, dict[str, Any]]] = [
    ("spec.placementPlanID", {"type": "string"}),
    ("spec.service", {"type": "string"}),
    ("spec.mode", {"type": "string", "enum": ["Single", "All", "Split", "SplitByCapacity"]}),
    (
        "spec.entries",
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["cluster"],
        },
    ),
    ("spec.observedISVCGeneration", INT64),
    ("spec.entries.[].cluster", {"type": "string"}),
    ("spec.entries.[].endpoint", {"type": "string"}),
    ("spec.entries.[].weight", {**INT32, "minimum": 0, "maximum": 1000000}),
    ("spec.entries.[].healthy", {"type": "boolean"}),
    ("spec.entries.[].capacity.allocated", INT32),
    ("spec.entries.[].capacity.ready", INT32),
    ("spec.entries.[].capacity.factor", {"x-kubernetes-int-or-string": True}),
    (
        "spec.entries.[].capacity.source",
        {"type": "string", "enum": ["ControlPlane", "Endpoint"], "default": "ControlPlane"},
    ),
    ("spec.entries.[].capacity.reported", {**INT32, "minimum": 0}),
    ("spec.entries.[].capacity.fallbackReason", {"type": "string"}),
    ("spec.entries.[].probe.policyDigest", {"type": "string", "pattern": DIGEST}),
    ("spec.entries.[].probe.result", {"type": "string", "enum": ["Passing", "Failing", "Unknown"]}),
    ("spec.entries.[].probe.gated", {"type": "boolean"}),
    ("spec.entries.[].probe.lastProbeTime", {"type": "string", "format": "date-time"}),
    ("spec.entries.[].probe.consecutiveFailures", {**INT32, "minimum": 0}),
    ("spec.entries.[].probe.message", {"type": "string"}),
    ("spec.entries.[].drainRefs", {"type": "array", "x-kubernetes-list-type": "set"}),
    ("status.sourceUID", {"type": "string"}),
    ("status.published", {"type": "boolean"}),
    ("status.gatewayRef", {"type": "object", "required": ["kind", "name"]}),
    ("status.observedTrafficMapGeneration", INT64),
    (
        "status.publisher.publisherName",
        {"type": "string", "minLength": 1, "maxLength": 128},
    ),
    (
        "status.publisher.claimedTargets",
        {"type": "array", "x-kubernetes-list-type": "set", "minItems": 1, "maxItems": 128},
    ),
    ("status.publisher.claimedTargets.[]", {"type": "string", "minLength": 1, "maxLength": 512}),
    ("status.publisher.observedOptionsDigest", {"type": "string", "pattern": DIGEST}),
    ("status.publisher.lastPositive.trafficMapGeneration", {**INT64, "minimum": 1}),
    ("status.publisher.lastPositive.observedISVCGeneration", {**INT64, "minimum": 1}),
    (
        "status.publisher.lastPositive.planCompatibilityDigest",
        {"type": "string", "pattern": DIGEST},
    ),
    (
        "status.publisher.lastPositive.targets",
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["target"],
            "minItems": 1,
            "maxItems": 128,
        },
    ),
    (
        "status.publisher.lastPositive.targets.[].target",
        {"type": "string", "minLength": 1, "maxLength": 512},
    ),
    ("status.publisher.lastPositive.targets.[].weight", {**INT64, "minimum": 0}),
    (
        "status.conditions",
        {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    ),
]


class TestTrafficMapCrd:
    def test_it_prints_omes_columns(self, render: Render) -> None:
        columns = version(crd(render, "trafficmaps.ome.io"))["additionalPrinterColumns"]
        assert [(c["name"], c["type"], c["jsonPath"]) for c in columns] == [
            ("Mode", "string", ".spec.mode"),
            ("Published", "string", '.status.conditions[?(@.type=="Published")].status'),
            ("Routable", "string", '.status.conditions[?(@.type=="Routable")].status'),
            ("Override", "string", '.status.conditions[?(@.type=="OverrideActive")].status'),
            ("Reason", "string", '.status.conditions[?(@.type=="Routable")].reason'),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]

    def test_it_is_namespaced_with_short_names_and_a_status_subresource(
        self, render: Render
    ) -> None:
        definition = crd(render, "trafficmaps.ome.io")
        assert definition["spec"]["scope"] == "Namespaced"
        assert definition["spec"]["names"]["shortNames"] == ["tm", "tmap"]
        assert version(definition)["subresources"] == {"status": {}}

    @pytest.mark.parametrize(
        ("path", "markers"), TRAFFICMAP_PATHS, ids=[p for p, _ in TRAFFICMAP_PATHS]
    )
    def test_each_path_has_omes_type_and_markers(
        self, render: Render, path: str, markers: dict[str, Any]
    ) -> None:
        node = schema_at(crd(render, "trafficmaps.ome.io"), path)
        assert {key: node.get(key) for key in markers} == markers

    @pytest.mark.parametrize(
        ("path", "required"),
        [
            ("spec", ["service"]),
            ("spec.entries.[]", ["cluster"]),
            ("status.publisher", ["publisherName"]),
            (
                "status.publisher.lastPositive",
                [
                    "trafficMapGeneration",
                    "observedISVCGeneration",
                    "planCompatibilityDigest",
                    "targets",
                ],
            ),
            ("status.publisher.lastPositive.targets.[]", ["target", "weight"]),
            ("status.conditions.[]", ["type", "status", "lastTransitionTime", "reason", "message"]),
        ],
    )
    def test_only_omes_required_fields_are_required(
        self, render: Render, path: str, required: list[str]
    ) -> None:
        assert sorted(required_at(crd(render, "trafficmaps.ome.io"), path)) == sorted(required)


# --- InferenceService and WorkloadCluster ---------------------------------------------------

CAPACITY_RULES = {
    "disabled must not be combined with capacity configuration fields",
    "an enabled capacity poll must specify path, method, format, period, timeout, samples, "
    "quorum, and maxAge",
    "period must be positive",
    "timeout must be positive",
    "timeout must be shorter than period",
    "maxAge must be at least period",
    "quorum must not exceed samples",
}


class TestInferenceServiceCrd:
    def test_the_capacity_poll_has_omes_rules_and_messages(self, render: Render) -> None:
        capacity = schema_at(crd(render, "inferenceservices.ome.io"), "spec.routing.capacity")
        messages = [rule["message"] for rule in capacity["x-kubernetes-validations"]]
        assert sorted(messages) == sorted(CAPACITY_RULES)

    @pytest.mark.parametrize(
        ("path", "markers"),
        [
            ("spec.routing.enabled", {"type": "boolean"}),
            ("spec.routing.capacityFactors", {"type": "object"}),
            ("spec.routing.capacity.disabled", {"type": "boolean"}),
            ("spec.routing.capacity.path", {"type": "string", "minLength": 1, "pattern": "^/"}),
            ("spec.routing.capacity.method", {"type": "string", "enum": ["GET", "HEAD", "POST"]}),
            ("spec.routing.capacity.format", {"type": "string", "minLength": 1}),
            (
                "spec.routing.capacity.options",
                {"type": "object", "additionalProperties": {"type": "string"}},
            ),
            ("spec.routing.capacity.samples", {**INT32, "minimum": 1}),
            ("spec.routing.capacity.quorum", {**INT32, "minimum": 1}),
            ("spec.routing.capacity.period", {"type": "string"}),
            ("spec.routing.capacity.timeout", {"type": "string"}),
            ("spec.routing.capacity.maxAge", {"type": "string"}),
            (
                "spec.routing.publisher.options",
                {"type": "object", "maxProperties": 32, "additionalProperties": {"type": "string"}},
            ),
        ],
    )
    def test_each_routing_path_has_omes_type_and_markers(
        self, render: Render, path: str, markers: dict[str, Any]
    ) -> None:
        node = schema_at(crd(render, "inferenceservices.ome.io"), path)
        assert {key: node.get(key) for key in markers} == markers

    def test_publisher_options_have_omes_bounds_message(self, render: Render) -> None:
        options = schema_at(
            crd(render, "inferenceservices.ome.io"), "spec.routing.publisher.options"
        )
        assert [rule["message"] for rule in options["x-kubernetes-validations"]] == [
            "publisher option keys must contain 1-128 characters and values must contain "
            "1-4096 characters"
        ]


class TestWorkloadClusterCrd:
    def test_it_is_cluster_scoped_as_wlc_and_prints_reachable(self, render: Render) -> None:
        definition = crd(render, "workloadclusters.ome.io")
        assert definition["spec"]["scope"] == "Cluster"
        assert definition["spec"]["names"]["shortNames"] == ["wlc"]
        columns = version(definition)["additionalPrinterColumns"]
        assert [(c["name"], c["jsonPath"]) for c in columns] == [
            ("Reachable", '.status.conditions[?(@.type=="Ready")].status'),
            ("Age", ".metadata.creationTimestamp"),
        ]
