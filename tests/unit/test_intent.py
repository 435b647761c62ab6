"""OME's placement intent: who takes part in placement, and OME's checks in its order and words.

The label texts are those of `k8s.io/apimachinery` v0.35 (`labels.NewRequirement`,
`validation.IsDNS1123Subdomain`), as a Go program built on it prints them.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.intent import (
    is_placement_eligible,
    read_placement_intent,
    validate_placement_intent,
)
from ome_routing.core.placement import PlacementIntentError

ORIGIN = "ome.io/placement-origin"
ORIGIN_UID = "ome.io/placement-origin-uid"
REQUIREMENTS = "ome.io/accelerator-requirements"
SELECTOR = "ome.io/cluster-selector"

PLAN = "an accepted placement plan requires spec.placement.policy: ClusterAffinity"
POLICY = "spec.placement.policy must explicitly select ClusterAffinity"
MODE = "spec.placement.mode must explicitly select Single, All, Split, or SplitByCapacity"
TERMS = "spec.placement.clusterAffinity must contain between 1 and 64 terms"
EMPTY_TERM = "spec.placement.clusterAffinity[0]: term must contain a label or field requirement"
MAX_SURGE = "spec.placement.maxSurge must be nonnegative whole replicas"
TIMEOUT = "spec.placement.replacementTimeout must be positive and is permitted only for Single"
SPLIT = "spec.placement.split is permitted only for Split and SplitByCapacity"
REPLICAS = "spec.placement.split.replicas must be positive when specified"
CEILING = "spec.placement.split.maxReplicasPerCluster must be nonnegative"
A0 = "spec.placement.clusterAffinity[0]: "
E0 = A0 + "matchExpressions[0]: "
F0 = A0 + "matchFields[0]: "
ONLY_NAME = F0 + "only metadata.name with In or NotIn is supported"
NAMES = F0 + "between 1 and 64 names are required"

KEY_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
IN_EMPTY = "for 'in', 'notin' operators, values set can't be empty"
EXISTS_VALUES = "values set must be empty for exists and does not exist"
ONE_VALUE = "for 'Gt', 'Lt' operators, exactly one value is required"
INTEGER = "for 'Gt', 'Lt' operators, the value must be an integer"


def placement(**fields: Any) -> dict[str, Any]:
    return {"policy": "ClusterAffinity", "mode": "Single"} | fields


def expression(key: str, operator: str, *values: str | None) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def bare(key: str, operator: str) -> dict[str, Any]:
    """A requirement without `values`: a nil slice in Go."""
    return {"key": key, "operator": operator}


def names(*values: str, operator: str = "In") -> dict[str, Any]:
    return {"key": "metadata.name", "operator": operator, "values": list(values)}


def affinity(*terms: object, mode: str = "Single") -> dict[str, Any]:
    return placement(mode=mode, clusterAffinity=list(terms))


def expressions(*requirements: object, mode: str = "Single") -> dict[str, Any]:
    return affinity({"matchExpressions": list(requirements)}, mode=mode)


def fields(*requirements: dict[str, Any]) -> dict[str, Any]:
    return affinity({"matchFields": list(requirements)})


def refusal(
    block: object = None,
    annotations: dict[str, str] | None = None,
    plan: bool = False,
    spec: dict[str, Any] | None = None,
) -> str:
    metadata = {"annotations": annotations or {}}
    with pytest.raises(PlacementIntentError) as caught:
        validate_placement_intent(metadata, spec or {"placement": block}, plan)
    return str(caught.value)


def accepts(block: object, annotations: dict[str, str] | None = None, plan: bool = False) -> None:
    validate_placement_intent({"annotations": annotations or {}}, {"placement": block}, plan)


# --- eligibility (IsPlacementEligible) ---------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "spec", "eligible"),
    [
        pytest.param({}, {"placement": placement()}, True, id="spec.placement"),
        pytest.param({}, {"placement": {}}, True, id="empty spec.placement"),
        pytest.param({}, {}, False, id="no placement"),
        pytest.param({}, {"placement": None}, False, id="null placement"),
        pytest.param(
            {"labels": {ORIGIN: "source"}}, {"placement": placement()}, False, id="derived copy"
        ),
        pytest.param(
            {"annotations": {ORIGIN_UID: "uid-1"}},
            {"placement": placement()},
            False,
            id="origin uid annotation",
        ),
        pytest.param(
            {"labels": {ORIGIN: ""}}, {"placement": placement()}, True, id="empty origin label"
        ),
        pytest.param(
            {"annotations": {ORIGIN_UID: ""}}, {"placement": placement()}, True, id="empty uid"
        ),
        pytest.param({"annotations": {REQUIREMENTS: "gpu=a100"}}, {}, True, id="requirements"),
        pytest.param({"annotations": {SELECTOR: ""}}, {}, True, id="empty selector annotation"),
        pytest.param(
            {"labels": {ORIGIN: "source"}, "annotations": {SELECTOR: "region=west"}},
            {},
            False,
            id="derived copy with a selector annotation",
        ),
        pytest.param({"labels": {SELECTOR: "x"}}, {}, False, id="selector as a label"),
        pytest.param({"labels": None, "annotations": None}, {}, False, id="null metadata maps"),
        pytest.param({}, {"placement": "Single"}, True, id="placement of the wrong type"),
    ],
)
def test_eligibility_follows_omes_rule(
    metadata: dict[str, Any], spec: dict[str, Any], eligible: bool
) -> None:
    assert is_placement_eligible(metadata, spec) is eligible


def test_a_placement_of_the_wrong_type_is_eligible_so_that_validation_reports_it() -> None:
    assert refusal("Single") == 'spec.placement must be an object, got "Single"'


# --- every message of ValidatePlacementIntent ---------------------------------------------


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param({}, POLICY, id="empty placement"),
        pytest.param({"mode": "Single"}, POLICY, id="mode without policy"),
        pytest.param(placement(policy="Legacy"), POLICY, id="retired policy"),
        pytest.param(placement(policy="clusterAffinity"), POLICY, id="policy is case-sensitive"),
        pytest.param(placement(mode=None), MODE, id="no mode"),
        pytest.param(placement(mode="single"), MODE, id="mode is case-sensitive"),
        pytest.param(placement(mode="Spread"), MODE, id="unknown mode"),
        pytest.param(placement(clusterAffinity=[]), TERMS, id="explicit empty affinity"),
        pytest.param(affinity(*[{"matchFields": [names("a")]}] * 65), TERMS, id="65 terms"),
        pytest.param(affinity({}), EMPTY_TERM, id="empty term"),
        pytest.param(affinity(None), EMPTY_TERM, id="null term"),
        pytest.param(
            affinity({"weight": 2, "matchExpressions": []}, mode="Split"),
            EMPTY_TERM,
            id="weight only",
        ),
        pytest.param(
            affinity({"matchExpressions": [bare("a", "Exists")] * 65}),
            A0 + "matchExpressions and matchFields each allow at most 64 requirements",
            id="65 expressions",
        ),
        pytest.param(
            affinity({"matchFields": [names("a")] * 65}),
            A0 + "matchExpressions and matchFields each allow at most 64 requirements",
            id="65 fields",
        ),
        *(
            pytest.param(
                affinity({"weight": 1, "matchFields": [names("a")]}, mode=mode),
                A0 + "weight is permitted only in Split mode",
                id=f"weight in {mode}",
            )
            for mode in ("Single", "All", "SplitByCapacity")
        ),
        *(
            pytest.param(
                affinity({"weight": weight, "matchFields": [names("a")]}, mode="Split"),
                A0 + "weight must be positive",
                id=f"weight {weight}",
            )
            for weight in (0, -1, -(2**31))
        ),
        pytest.param(
            expressions(expression("region", "In", *["west"] * 65)),
            E0 + "at most 64 values are allowed",
            id="65 values",
        ),
        pytest.param(
            expressions(bare("region", "Unknown")), E0 + 'unsupported operator "Unknown"', id="op"
        ),
        pytest.param(
            expressions(bare("region", "in")), E0 + 'unsupported operator "in"', id="selector op"
        ),
        pytest.param(expressions({"key": "region"}), E0 + 'unsupported operator ""', id="no op"),
        pytest.param(expressions(None), E0 + 'unsupported operator ""', id="null requirement"),
        pytest.param(
            expressions(bare("region", "Equals")),
            E0 + 'unsupported operator "Equals"',
            id="selector-only operator",
        ),
        pytest.param(
            fields(expression("metadata.namespace", "In", "a")), ONLY_NAME, id="other field"
        ),
        pytest.param(fields(bare("metadata.name", "Exists")), ONLY_NAME, id="field Exists"),
        pytest.param(fields(expression("metadata.name", "Gt", "1")), ONLY_NAME, id="field Gt"),
        pytest.param(fields(bare("metadata.name", "In")), NAMES, id="no names"),
        pytest.param(fields(names(operator="NotIn")), NAMES, id="empty names"),
        pytest.param(fields(names(*["a"] * 65)), NAMES, id="65 names"),
        pytest.param(
            fields(names("worker-a", "Invalid")),
            F0 + f'invalid WorkloadCluster name "Invalid": [{SUBDOMAIN_RULE}]',
            id="invalid name",
        ),
        pytest.param(
            fields(names("a" * 254)),
            F0
            + f'invalid WorkloadCluster name "{"a" * 254}": [must be no more than 253 characters]',
            id="long name",
        ),
        pytest.param(
            fields(names("A" * 254)),
            F0 + f'invalid WorkloadCluster name "{"A" * 254}": '
            f"[must be no more than 253 characters {SUBDOMAIN_RULE}]",
            id="two problems, as Go's %v of a list",
        ),
        pytest.param(
            fields(names('say "hi"\n')),
            F0 + f'invalid WorkloadCluster name "say \\"hi\\"\\n": [{SUBDOMAIN_RULE}]',
            id="name quoted as Go's %q",
        ),
        pytest.param(placement(maxSurge=-1), MAX_SURGE, id="negative maxSurge"),
        pytest.param(placement(mode="All", replacementTimeout="5m"), TIMEOUT, id="timeout in All"),
        pytest.param(placement(replacementTimeout="0s"), TIMEOUT, id="zero timeout"),
        pytest.param(placement(replacementTimeout="0"), TIMEOUT, id="bare zero timeout"),
        pytest.param(placement(replacementTimeout="-1m"), TIMEOUT, id="negative timeout"),
        pytest.param(placement(split={"replicas": 2}), SPLIT, id="split in Single"),
        pytest.param(placement(mode="All", split={}), SPLIT, id="empty split in All"),
        pytest.param(placement(mode="Split", split={"replicas": 0}), REPLICAS, id="replicas 0"),
        pytest.param(
            placement(mode="SplitByCapacity", split={"maxReplicasPerCluster": -1}),
            CEILING,
            id="negative ceiling",
        ),
    ],
)
def test_each_of_omes_placement_checks_fails_in_its_words(block: object, message: str) -> None:
    assert refusal(block) == message


def test_an_accepted_plan_without_cluster_affinity_is_refused() -> None:
    assert refusal(None, plan=True) == PLAN
    assert refusal(placement(policy="Legacy"), plan=True) == PLAN
    assert refusal({"mode": "Single"}, plan=True) == PLAN


@pytest.mark.parametrize("key", [REQUIREMENTS, SELECTOR])
@pytest.mark.parametrize("value", ["", "region=west"])
def test_a_selector_annotation_is_refused_even_empty(key: str, value: str) -> None:
    assert refusal(placement(), annotations={key: value}) == (
        f"annotation {key} is unsupported; declare spec.placement.mode and migrate "
        "restrictions to clusterAffinity"
    )


def test_an_annotation_only_service_is_refused_without_a_placement() -> None:
    assert refusal(spec={}, annotations={SELECTOR: "region=west"}).startswith(
        f"annotation {SELECTOR} is unsupported"
    )


# --- labels.NewRequirement, embedded in matchExpressions errors ----------------------------


@pytest.mark.parametrize(
    ("requirement", "error"),
    [
        pytest.param(
            bare("bad key", "Exists"), f'key: Invalid value: "bad key": name part {KEY_RULE}'
        ),
        pytest.param(
            bare("a" * 64, "Exists"),
            f'key: Invalid value: "{"a" * 64}": name part must be no more than 63 bytes',
        ),
        pytest.param(
            bare("Bad_Prefix/name", "Exists"),
            f'key: Invalid value: "Bad_Prefix/name": prefix part {SUBDOMAIN_RULE}',
        ),
        pytest.param(
            bare("/name", "Exists"), 'key: Invalid value: "/name": prefix part must be non-empty'
        ),
        pytest.param(
            bare("/", "Exists"),
            'key: Invalid value: "/": prefix part must be non-empty; name part must be '
            f"non-empty; name part {KEY_RULE}",
        ),
        pytest.param(
            bare("a/b/c", "Exists"),
            f'key: Invalid value: "a/b/c": a valid label key {KEY_RULE} with an optional DNS '
            "subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
        pytest.param(bare("region", "In"), f"values: Invalid value: null: {IN_EMPTY}"),
        pytest.param(expression("region", "NotIn"), f"values: Invalid value: []: {IN_EMPTY}"),
        pytest.param(
            expression("region", "Exists", "west"),
            f'values: Invalid value: ["west"]: {EXISTS_VALUES}',
        ),
        pytest.param(
            expression("region", "DoesNotExist", "west"),
            f'values: Invalid value: ["west"]: {EXISTS_VALUES}',
        ),
        pytest.param(bare("size", "Gt"), f"values: Invalid value: null: {ONE_VALUE}"),
        pytest.param(
            expression("size", "Lt", "1", "2"), f'values: Invalid value: ["1","2"]: {ONE_VALUE}'
        ),
        pytest.param(expression("size", "Gt", "x"), f'values[0]: Invalid value: "x": {INTEGER}'),
        pytest.param(
            expression("size", "Lt", "9223372036854775808"),
            f'values[0]: Invalid value: "9223372036854775808": {INTEGER}',
        ),
        pytest.param(
            expression("region", "In", "bad value"),
            f'values[0][region]: Invalid value: "bad value": {VALUE_RULE}',
        ),
        pytest.param(
            expression("region", "In", "west", "a" * 64),
            f'values[1][region]: Invalid value: "{"a" * 64}": must be no more than 63 bytes',
        ),
        pytest.param(
            expression("region", "In", "é" * 32),
            f'values[0][region]: Invalid value: "{"é" * 32}": must be no more than 63 bytes; '
            + VALUE_RULE,
            id="bytes, not characters",
        ),
        pytest.param(
            expression("bad key", "In"),
            f'[key: Invalid value: "bad key": name part {KEY_RULE}, '
            f"values: Invalid value: []: {IN_EMPTY}]",
            id="several problems, as Go aggregates them",
        ),
        pytest.param(
            expression("size", "Gt", "x y", "2"),
            f'[values: Invalid value: ["x y","2"]: {ONE_VALUE}, '
            f'values[0]: Invalid value: "x y": {INTEGER}, '
            f'values[0][size]: Invalid value: "x y": {VALUE_RULE}]',
        ),
        pytest.param(
            expression("region", "Exists", "<a&b>"),
            f'[values: Invalid value: ["\\u003ca\\u0026b\\u003e"]: {EXISTS_VALUES}, '
            f'values[0][region]: Invalid value: "<a&b>": {VALUE_RULE}]',
            id="json.Marshal escapes HTML, %q does not",
        ),
    ],
)
def test_a_bad_label_requirement_carries_the_api_machinerys_error(
    requirement: dict[str, Any], error: str
) -> None:
    assert refusal(expressions(requirement)) == E0 + error


@pytest.mark.parametrize(
    "requirement",
    [
        expression("region", "In", "west", "east"),
        expression("example.com/region", "NotIn", ""),
        expression("region", "In", None),  # a null value is the empty string
        bare("gpu", "Exists"),
        expression("gpu", "DoesNotExist"),
        expression("size", "Gt", "0007"),
        expression("size", "Lt", "9223372036854775807"),
    ],
)
def test_a_good_label_requirement_passes(requirement: dict[str, Any]) -> None:
    accepts(expressions(requirement))


# --- the order: the first failure wins ------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "annotations", "plan", "message"),
    [
        pytest.param(
            placement(policy="Legacy", mode="x"), {SELECTOR: ""}, True, PLAN, id="plan first"
        ),
        pytest.param(
            placement(mode="x"),
            {SELECTOR: ""},
            True,
            f"annotation {SELECTOR} is unsupported; declare spec.placement.mode and migrate "
            "restrictions to clusterAffinity",
            id="annotation once the plan passes",
        ),
        pytest.param(
            placement(),
            {SELECTOR: "", REQUIREMENTS: ""},
            False,
            f"annotation {REQUIREMENTS} is unsupported; declare spec.placement.mode and migrate "
            "restrictions to clusterAffinity",
            id="accelerator requirements before the cluster selector",
        ),
        pytest.param(placement(mode="x"), {}, True, MODE, id="placement once the rest pass"),
        pytest.param(
            {"policy": "Legacy", "mode": "x", "maxSurge": -1}, {}, False, POLICY, id="policy"
        ),
        pytest.param(placement(mode="x", clusterAffinity=[]), {}, False, MODE, id="mode"),
        pytest.param(placement(clusterAffinity=[], maxSurge=-1), {}, False, TERMS, id="affinity"),
        pytest.param(
            placement(maxSurge=-1, replacementTimeout="0s"), {}, False, MAX_SURGE, id="maxSurge"
        ),
        pytest.param(
            placement(mode="All", replacementTimeout="1m", split={"replicas": 0}),
            {},
            False,
            TIMEOUT,
            id="replacementTimeout",
        ),
        pytest.param(
            placement(split={"replicas": 0, "maxReplicasPerCluster": -1}),
            {},
            False,
            SPLIT,
            id="split's mode before its fields",
        ),
        pytest.param(
            placement(mode="Split", split={"replicas": 0, "maxReplicasPerCluster": -1}),
            {},
            False,
            REPLICAS,
            id="replicas before the ceiling",
        ),
    ],
)
def test_the_first_failure_in_omes_order_wins(
    block: object, annotations: dict[str, str], plan: bool, message: str
) -> None:
    assert refusal(block, annotations=annotations, plan=plan) == message


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param(
            affinity({"weight": 1}, {}, mode="Single"), EMPTY_TERM, id="emptiness before weight"
        ),
        pytest.param(
            affinity({"weight": 1, "matchExpressions": [bare("a", "Exists")] * 65}),
            A0 + "matchExpressions and matchFields each allow at most 64 requirements",
            id="counts before weight",
        ),
        pytest.param(
            affinity({"weight": 1, "matchExpressions": [bare("a", "x")]}),
            A0 + "weight is permitted only in Split mode",
            id="weight before expressions",
        ),
        pytest.param(
            affinity(
                {"matchExpressions": [bare("a", "Exists"), bare("b", "x")], "matchFields": [{}]}
            ),
            A0 + 'matchExpressions[1]: unsupported operator "x"',
            id="expressions before fields",
        ),
        pytest.param(
            affinity({"matchFields": [names("a")]}, {}, {"matchFields": [{}]}),
            "spec.placement.clusterAffinity[1]: term must contain a label or field requirement",
            id="terms in order",
        ),
        pytest.param(
            expressions({"key": "bad key", "operator": "x", "values": ["v"] * 65}),
            E0 + "at most 64 values are allowed",
            id="value count before operator",
        ),
        pytest.param(
            expressions(bare("bad key", "x")),
            E0 + 'unsupported operator "x"',
            id="operator before the requirement",
        ),
        pytest.param(
            fields(names("Bad", "Worse")),
            F0 + f'invalid WorkloadCluster name "Bad": [{SUBDOMAIN_RULE}]',
            id="the first bad name",
        ),
    ],
)
def test_within_the_affinity_the_first_failure_wins(block: object, message: str) -> None:
    assert refusal(block) == message


# --- what passes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(None, id="no placement"),
        placement(),
        placement(mode="All", clusterAffinity=None, maxSurge=0),
        placement(replacementTimeout="90s", maxSurge=1),
        placement(
            mode="Split",
            clusterAffinity=[
                {"weight": 3, "matchExpressions": [expression("region", "In", "west")]},
                {"matchFields": [names("worker-a", "worker-b", operator="NotIn")]},
            ],
            split={"replicas": 4, "maxReplicasPerCluster": 0},
        ),
        placement(mode="SplitByCapacity", split={"replicas": None}),
        pytest.param(
            placement(
                mode="Split",
                clusterAffinity=[
                    {"weight": 400, "matchFields": [names("worker-a")]},
                    {"weight": 168, "matchFields": [names("worker-b")]},
                ],
            ),
            id="weights are replica ratios with no upper bound (selector_test.go@8263d0c7)",
        ),
        pytest.param(
            placement(requirements="gpu=a100", clusterSelector="x", capacityFactors={"a": "2"}),
            id="fields OME no longer has are ignored",
        ),
    ],
)
def test_intent_that_ome_accepts_passes(block: object) -> None:
    accepts(block)


def test_a_plan_with_cluster_affinity_passes() -> None:
    accepts(placement(), plan=True)


def test_other_annotations_pass() -> None:
    accepts(placement(), annotations={ORIGIN: "x", "ome.io/traffic-drain": "{}"})


def test_null_reads_as_go_reads_it() -> None:
    """null is the zero value: an absent list, an empty string, a 0 ceiling; `[]` stays."""
    intent = read_placement_intent(
        {
            "placement": placement(
                clusterAffinity=[{"weight": None, "matchExpressions": [bare("a", "Exists")]}],
                maxSurge=None,
                split={"maxReplicasPerCluster": None},
                mode="Split",
            )
        }
    )
    assert intent is not None
    assert intent.cluster_affinity is not None
    assert intent.cluster_affinity[0].weight is None
    assert intent.cluster_affinity[0].match_expressions[0].values is None
    assert intent.cluster_affinity[0].match_fields == ()
    assert intent.max_surge is None
    assert intent.split is not None and intent.split.max_replicas_per_cluster == 0
    assert read_placement_intent({"placement": None}) is None


def test_a_lone_surrogate_reads_as_the_replacement_character_as_in_go() -> None:
    assert refusal(fields(names("a\ud800"))) == (
        F0 + f'invalid WorkloadCluster name "a\ufffd": [{SUBDOMAIN_RULE}]'
    )


# --- values of the wrong type: named, before any of OME's checks -------------------------------


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ([], "spec.placement must be an object, got []"),
        (5, "spec.placement must be an object, got 5"),
        (placement(mode=5), "spec.placement.mode must be a string, got 5"),
        (placement(policy=True), "spec.placement.policy must be a string, got true"),
        (
            placement(clusterAffinity={"matchFields": []}),
            'spec.placement.clusterAffinity must be a list, got {"matchFields": []}',
        ),
        (
            placement(clusterAffinity="region=west"),
            'spec.placement.clusterAffinity must be a list, got "region=west"',
        ),
        (
            affinity("region=west"),
            'spec.placement.clusterAffinity[0] must be an object, got "region=west"',
        ),
        (
            affinity({"weight": "2"}, mode="Split"),
            'spec.placement.clusterAffinity[0].weight must be a 32-bit whole number, got "2"',
        ),
        (
            affinity({"weight": 1.5}, mode="Split"),
            "spec.placement.clusterAffinity[0].weight must be a 32-bit whole number, got 1.5",
        ),
        (
            affinity({"weight": 2**31}, mode="Split"),
            "spec.placement.clusterAffinity[0].weight must be a 32-bit whole number, "
            "got 2147483648",
        ),
        (
            affinity({"matchExpressions": "a"}),
            'spec.placement.clusterAffinity[0].matchExpressions must be a list, got "a"',
        ),
        (
            expressions({"key": 5, "operator": "Exists"}),
            "spec.placement.clusterAffinity[0].matchExpressions[0].key must be a string, got 5",
        ),
        (
            expressions({"key": "a", "operator": "In", "values": "west"}),
            "spec.placement.clusterAffinity[0].matchExpressions[0].values must be a list, "
            'got "west"',
        ),
        (
            fields({"key": "metadata.name", "operator": "In", "values": [1]}),
            "spec.placement.clusterAffinity[0].matchFields[0].values[0] must be a string, got 1",
        ),
        (placement(maxSurge="1"), 'spec.placement.maxSurge must be a 32-bit whole number, got "1"'),
        (
            placement(maxSurge=False),
            "spec.placement.maxSurge must be a 32-bit whole number, got false",
        ),
        (
            placement(replacementTimeout=300),
            'spec.placement.replacementTimeout must be a duration such as "5m", got 300',
        ),
        (
            placement(replacementTimeout="5 minutes"),
            'spec.placement.replacementTimeout: "5 minutes" is not a duration '
            '(use forms like "30s", "5m")',
        ),
        (
            placement(replacementTimeout=""),
            'spec.placement.replacementTimeout: "" is not a duration (use forms like "30s", "5m")',
        ),
        (placement(split=[]), "spec.placement.split must be an object, got []"),
        (
            placement(mode="Split", split={"replicas": 2.0}),
            "spec.placement.split.replicas must be a 32-bit whole number, got 2.0",
        ),
        (
            placement(mode="Split", split={"maxReplicasPerCluster": -(2**31) - 1}),
            "spec.placement.split.maxReplicasPerCluster must be a 32-bit whole number, "
            "got -2147483649",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_named_with_its_value(block: object, message: str) -> None:
    assert refusal(block) == message


def test_a_value_of_the_wrong_type_comes_before_omes_checks() -> None:
    """Go could not decode such an object at all, so none of OME's checks would run."""
    assert refusal(
        placement(policy="Legacy", maxSurge="x"), annotations={SELECTOR: ""}, plan=True
    ) == ('spec.placement.maxSurge must be a 32-bit whole number, got "x"')


# --- any input: passes, or fails as PlacementIntentError ------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["In", "NotIn", "Exists", "Gt", "Lt", "metadata.name", "Split", "1", "0s"])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)


def mostly(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Nine times in ten a value of the field's own shape, else any JSON value."""
    return st.integers(0, 9).flatmap(lambda draw: JSON if draw == 0 else strategy)


def shaped(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with some of OME's keys, each mostly of its own shape."""
    return st.fixed_dictionaries({}, optional={key: mostly(s) for key, s in fields.items()})


TEXTS = st.lists(st.text(max_size=6) | st.sampled_from(["1", "west", "worker-a"]), max_size=3)
REQUIREMENT = shaped(
    {
        "key": st.sampled_from(["region", "metadata.name", "a/b", ""]) | st.text(max_size=6),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
        "values": TEXTS,
    }
)
REQUIREMENTS_LIST = st.lists(REQUIREMENT, max_size=3)
TERM = shaped(
    {
        "weight": st.integers(min_value=-2, max_value=3),
        "matchExpressions": REQUIREMENTS_LIST,
        "matchFields": REQUIREMENTS_LIST,
    }
)
PLACEMENT = shaped(
    {
        "policy": st.just("ClusterAffinity"),
        "mode": st.sampled_from(["Single", "All", "Split", "SplitByCapacity"]),
        "clusterAffinity": st.lists(TERM, max_size=3),
        "maxSurge": st.integers(min_value=-1, max_value=2),
        "replacementTimeout": st.sampled_from(["1m", "0s", "-1s"]),
        "split": shaped(
            {
                "replicas": st.integers(min_value=-1, max_value=2),
                "maxReplicasPerCluster": st.integers(min_value=-1, max_value=2),
            }
        ),
    }
)
METADATA = st.fixed_dictionaries(
    {},
    optional={
        "labels": mostly(st.dictionaries(st.sampled_from([ORIGIN, "x"]), JSON, max_size=2)),
        "annotations": mostly(
            st.dictionaries(
                st.sampled_from([ORIGIN_UID, "x", SELECTOR, REQUIREMENTS]), JSON, max_size=1
            )
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    METADATA,
    st.fixed_dictionaries({}, optional={"placement": mostly(PLACEMENT)}),
    st.sampled_from([False, False, False, True]),
)
def test_any_input_passes_or_fails_as_a_placement_intent_error(
    metadata: dict[str, Any], spec: dict[str, Any], plan: bool
) -> None:
    assert isinstance(is_placement_eligible(metadata, spec), bool)
    try:
        validate_placement_intent(metadata, spec, plan)
    except PlacementIntentError as err:
        assert str(err)
