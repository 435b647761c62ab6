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


#: `spec.placement` as OME v1.3 declares it (placement_types.go, cluster_affinity_types.go).
REQUIREMENT = {
    "type": "object",
    "required": ["key", "operator"],
    "properties": {
        "key": {"type": "string", "minLength": 1},
        "operator": {
            "type": "string",
            "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
        },
        "values": {
            "type": "array",
            "maxItems": 64,
            "x-kubernetes-list-type": "atomic",
            "items": {"type": "string"},
        },
    },
}
PLACEMENT_PATHS: list[tuple[str, dict[str, Any]]] = [
    ("spec.placement", {"type": "object", "required": ["policy", "mode"]}),
    ("spec.placement.policy", {"type": "string", "enum": ["ClusterAffinity"]}),
    (
        "spec.placement.mode",
        {"type": "string", "enum": ["Single", "All", "Split", "SplitByCapacity"]},
    ),
    (
        "spec.placement.clusterAffinity",
        {
            "type": "array",
            "nullable": True,
            "minItems": 1,
            "maxItems": 64,
            "x-kubernetes-list-type": "atomic",
        },
    ),
    # replica ratios, with no upper bound in v1.3 (`cluster_affinity_types.go@8263d0c7`)
    ("spec.placement.clusterAffinity.[].weight", {**INT32, "minimum": 1}),
    (
        "spec.placement.clusterAffinity.[].matchExpressions",
        {"type": "array", "maxItems": 64, "x-kubernetes-list-type": "atomic", "items": REQUIREMENT},
    ),
    (
        "spec.placement.clusterAffinity.[].matchFields",
        {"type": "array", "maxItems": 64, "x-kubernetes-list-type": "atomic", "items": REQUIREMENT},
    ),
    ("spec.placement.maxSurge", {**INT32, "minimum": 0}),
    ("spec.placement.replacementTimeout", {"type": "string"}),
    ("spec.placement.split.replicas", {**INT32, "minimum": 1}),
    ("spec.placement.split.maxReplicasPerCluster", {**INT32, "minimum": 0}),
]
#: OME's CEL rules in spec.placement, exactly: (path, rule, message).
PLACEMENT_RULES = [
    (
        "spec.placement",
        "!has(self.replacementTimeout) || (has(self.policy) && self.policy == 'ClusterAffinity' "
        "&& has(self.mode) && self.mode == 'Single')",
        "replacementTimeout requires ClusterAffinity Single placement",
    ),
    (
        "spec.placement.clusterAffinity.[]",
        "(has(self.matchExpressions) && size(self.matchExpressions) > 0) || "
        "(has(self.matchFields) && size(self.matchFields) > 0)",
        "a cluster affinity term must contain a requirement",
    ),
    (
        "spec.placement.replacementTimeout",
        "duration(self) > duration('0s')",
        "replacementTimeout must be a positive duration",
    ),
]
BOOL = {"type": "boolean"}
STRING = {"type": "string"}
#: Every field of status.placement.plan and of a candidate's allocation (OME's JSON names).
STATUS_PATHS: list[tuple[str, dict[str, Any]]] = [
    (
        "status.placement.candidates",
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["cluster"],
        },
    ),
    ("status.placement.cluster", STRING),
    ("status.placement.endpoint", STRING),
    ("status.placement.plan.id", STRING),
    (
        "status.placement.plan.mode",
        {"type": "string", "enum": ["Single", "All", "Split", "SplitByCapacity"]},
    ),
    ("status.placement.plan.winner", STRING),
    ("status.placement.plan.singleMove.selected", STRING),
    ("status.placement.plan.singleMove.cursor", STRING),
    ("status.placement.plan.adoptionDigest", STRING),
    ("status.placement.plan.revision", {**INT64, "minimum": 1}),
    ("status.placement.plan.sourceUID", STRING),
    ("status.placement.plan.observedGeneration", {**INT64, "minimum": 1}),
    ("status.placement.plan.inputDigest", STRING),
    ("status.placement.plan.pauseSurge", BOOL),
    ("status.placement.plan.requestedReplicas", {**INT64, "minimum": 0}),
    ("status.placement.plan.assignedReplicas", {**INT64, "minimum": 0}),
    ("status.placement.plan.unassignedReplicas", {**INT32, "minimum": 0}),
    ("status.placement.plan.originalUnassignedReplicas", {**INT32, "minimum": 0}),
    ("status.placement.candidates.[].appliedPlanID", STRING),
    ("status.placement.candidates.[].observationKnown", BOOL),
    (
        "status.placement.candidates.[].observationFailingSince",
        {"type": "string", "format": "date-time"},
    ),
    ("status.placement.candidates.[].allocation.clusterUID", STRING),
    ("status.placement.candidates.[].allocation.inventoryPending", BOOL),
    ("status.placement.candidates.[].allocation.homeInputsPending", BOOL),
    ("status.placement.candidates.[].allocation.raceCandidate", BOOL),
    (
        "status.placement.candidates.[].allocation.replacementStartedAt",
        {"type": "string", "format": "date-time"},
    ),
    ("status.placement.candidates.[].allocation.matched", BOOL),
    ("status.placement.candidates.[].allocation.currentHome.inputDigest", STRING),
    (
        "status.placement.candidates.[].allocation.currentHome.replicaFloors",
        {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "x-kubernetes-list-map-keys": ["component"],
        },
    ),
    ("status.placement.candidates.[].allocation.desiredHome.inputDigest", STRING),
    (
        "status.placement.candidates.[].allocation.desiredHome.replicaFloors.[].component",
        {"type": "string", "enum": ["engine", "decoder", "router"]},
    ),
    (
        "status.placement.candidates.[].allocation.matchingTerms",
        {"type": "array", "x-kubernetes-list-type": "set", "items": INT32},
    ),
    ("status.placement.candidates.[].allocation.weight", {**INT64, "minimum": 0}),
    ("status.placement.candidates.[].allocation.capacity.demandFingerprint", STRING),
    ("status.placement.candidates.[].allocation.capacity.replicas", {**INT64, "minimum": 0}),
    (
        "status.placement.candidates.[].allocation.capacity.pools",
        {"type": "array", "x-kubernetes-list-map-keys": ["resourceName", "resourceFlavor"]},
    ),
    ("status.placement.candidates.[].allocation.originalReplicas", {**INT32, "minimum": 0}),
    ("status.placement.candidates.[].allocation.currentReplicas", {**INT32, "minimum": 0}),
    ("status.placement.candidates.[].allocation.desiredReplicas", {**INT32, "minimum": 0}),
    ("status.placement.candidates.[].allocation.drainRequested", BOOL),
]


class TestInferenceServicePlacement:
    @pytest.mark.parametrize(
        ("path", "markers"), PLACEMENT_PATHS, ids=[p for p, _ in PLACEMENT_PATHS]
    )
    def test_each_placement_path_has_omes_type_and_markers(
        self, render: Render, path: str, markers: dict[str, Any]
    ) -> None:
        node = schema_at(crd(render, "inferenceservices.ome.io"), path)
        assert {key: node.get(key) for key in markers} == markers

    def test_the_placement_declares_omes_fields_only(self, render: Render) -> None:
        placement = schema_at(crd(render, "inferenceservices.ome.io"), "spec.placement")
        assert sorted(placement["properties"]) == sorted(
            ["policy", "mode", "clusterAffinity", "maxSurge", "replacementTimeout", "split"]
        )
        assert "x-kubernetes-preserve-unknown-fields" not in placement

    @pytest.mark.parametrize(
        ("path", "rule", "message"), PLACEMENT_RULES, ids=[m for _, _, m in PLACEMENT_RULES]
    )
    def test_the_placement_has_omes_cel_rules_and_messages(
        self, render: Render, path: str, rule: str, message: str
    ) -> None:
        node = schema_at(crd(render, "inferenceservices.ome.io"), path)
        assert node["x-kubernetes-validations"] == [{"rule": rule, "message": message}]

    @pytest.mark.parametrize(("path", "markers"), STATUS_PATHS, ids=[p for p, _ in STATUS_PATHS])
    def test_each_plan_and_allocation_field_is_declared_with_omes_type(
        self, render: Render, path: str, markers: dict[str, Any]
    ) -> None:
        node = schema_at(crd(render, "inferenceservices.ome.io"), path)
        assert {key: node.get(key) for key in markers} == markers

    def test_the_allocation_declares_every_field_of_omes(self, render: Render) -> None:
        allocation = schema_at(
            crd(render, "inferenceservices.ome.io"), "status.placement.candidates.[].allocation"
        )
        declared = {
            p.rsplit(".", 1)[1]
            for p, _ in STATUS_PATHS
            if p.startswith("status.placement.candidates.[].allocation.") and p.count(".") == 5
        }
        assert set(allocation["properties"]) == declared | {
            "currentHome",
            "desiredHome",
            "capacity",
        }


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

    def test_its_schema_is_omes_generated_schema(self, render: Render) -> None:
        """ome.io_workloadclusters.yaml of OME v1.3 (controller-gen v0.18.0), as data."""
        schema = version(crd(render, "workloadclusters.ome.io"))["schema"]["openAPIV3Schema"]
        assert schema == WORKLOADCLUSTER_SCHEMA


CONDITION = {
    "type": "object",
    "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    "properties": {
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "message": {"type": "string", "maxLength": 32768},
        "observedGeneration": {**INT64, "minimum": 0},
        "reason": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1024,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        },
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "type": {
            "type": "string",
            "maxLength": 316,
            "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        },
    },
}
WORKLOADCLUSTER_SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["clusterSource"],
            "properties": {
                "clusterSource": {
                    "type": "object",
                    "properties": {
                        "clusterProfileRef": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {"name": {"type": "string"}},
                        },
                        "kubeConfig": {
                            "type": "object",
                            "required": ["secretRef"],
                            "properties": {
                                "key": {"type": "string", "default": "kubeconfig"},
                                "secretRef": {
                                    "type": "object",
                                    "properties": {
                                        "name": {"type": "string"},
                                        "namespace": {"type": "string"},
                                    },
                                    "x-kubernetes-map-type": "atomic",
                                },
                            },
                        },
                    },
                    "x-kubernetes-validations": [
                        {
                            "message": "exactly one of kubeConfig or clusterProfileRef must be set",
                            "rule": "has(self.kubeConfig) != has(self.clusterProfileRef)",
                        }
                    ],
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "conditions": {
                    "type": "array",
                    "items": CONDITION,
                    "x-kubernetes-list-map-keys": ["type"],
                    "x-kubernetes-list-type": "map",
                }
            },
        },
    },
}
