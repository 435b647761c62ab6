"""Which InferenceServices take part in placement, and whether OME accepts their intent.

`is_placement_eligible` is OME's `IsPlacementEligible`
(`pkg/controller/v1beta1/placement/controller.go@2af192b3`): a copy that placement
derived on a workload cluster (label `ome.io/placement-origin` or annotation
`ome.io/placement-origin-uid` not empty) never takes part; otherwise a service does when
it has `spec.placement` (not null) or either obsolete selector annotation, even empty.

`validate_placement_intent` is OME's `ValidatePlacementIntent`
(`pkg/validation/placement.go@2af192b3`, with `placement/affinity.Compile` and the
API machinery's `labels.NewRequirement`, `core.labelrules`): OME's checks in OME's
order, the first failure wins, in OME's words. Its messages carry no prefix; the
reconcile puts `validate placement intent: ` in front, as OME's routing controller does.

`spec.placement` is read as Go decodes it into OME's types: unknown fields are ignored
(the older `requirements`, `clusterSelector`, `capacityFactors`), null is the zero value
(an absent list, an empty string, a null element of a list an empty item), `[]` stays
an explicit empty list. A value of the wrong type, which the CRD's schema would refuse
and which Go could not decode at all, fails before any of OME's checks, naming the
field and the value: `spec.placement.mode must be a string, got 5`.

Errors: `PlacementIntentError` (from `core.placement`, a `ValueError`). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ome_routing.core.durations import Duration, DurationError, parse_duration
from ome_routing.core.fields import not_a_duration, show
from ome_routing.core.labelrules import OPERATORS, dns1123_subdomain_problems, requirement_error
from ome_routing.core.placement import (
    CLUSTER_AFFINITY,
    PLAN_NEEDS_CLUSTER_AFFINITY,
    PlacementIntentError,
)
from ome_routing.core.quoting import quote

__all__ = [
    "ACCELERATOR_REQUIREMENTS_ANNOTATION",
    "CLUSTER_SELECTOR_ANNOTATION",
    "PLACEMENT_ORIGIN_LABEL",
    "PLACEMENT_ORIGIN_UID_ANNOTATION",
    "AffinityTerm",
    "PlacementIntent",
    "Requirement",
    "SplitIntent",
    "is_placement_eligible",
    "read_placement_intent",
    "validate_placement_intent",
]

PLACEMENT_ORIGIN_LABEL = "ome.io/placement-origin"
PLACEMENT_ORIGIN_UID_ANNOTATION = "ome.io/placement-origin-uid"
ACCELERATOR_REQUIREMENTS_ANNOTATION = "ome.io/accelerator-requirements"
CLUSTER_SELECTOR_ANNOTATION = "ome.io/cluster-selector"
#: The obsolete selector annotations, in the order OME checks them.
SELECTOR_ANNOTATIONS = (ACCELERATOR_REQUIREMENTS_ANNOTATION, CLUSTER_SELECTOR_ANNOTATION)

SINGLE, ALL, SPLIT, SPLIT_BY_CAPACITY = "Single", "All", "Split", "SplitByCapacity"
MODES = frozenset({SINGLE, ALL, SPLIT, SPLIT_BY_CAPACITY})
#: OME's API limits on a selector's size (`cluster_affinity_types.go`).
MAX_TERMS = MAX_REQUIREMENTS = MAX_VALUES = 64
NAME_FIELD = "metadata.name"

ANNOTATION_UNSUPPORTED = (
    "annotation {} is unsupported; declare spec.placement.mode and migrate restrictions to "
    "clusterAffinity"
)

_INT32 = range(-(2**31), 2**31)
_SURROGATE = re.compile("[\ud800-\udfff]")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `matchExpressions` or `matchFields` entry; `values` None when absent or null."""

    key: str
    operator: str
    values: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    weight: int | None
    match_expressions: tuple[Requirement, ...]
    match_fields: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class SplitIntent:
    replicas: int | None
    max_replicas_per_cluster: int


@dataclass(frozen=True, slots=True)
class PlacementIntent:
    """`spec.placement` as OME's `PlacementSpec` holds it (empty strings when unset)."""

    policy: str
    mode: str
    #: None when absent or null (no restriction); `()` when written as `[]`.
    cluster_affinity: tuple[AffinityTerm, ...] | None
    max_surge: int | None
    replacement_timeout: Duration | None
    split: SplitIntent | None


# --- eligibility ---------------------------------------------------------------------


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def is_placement_eligible(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """OME's `IsPlacementEligible`: whether the service takes part in placement.

    A `spec.placement` that is not an object still counts (it is not null), so that
    validation reports it instead of the service silently leaving routing.
    """
    labels = _map(metadata.get("labels"))
    annotations = _map(metadata.get("annotations"))
    if labels.get(PLACEMENT_ORIGIN_LABEL) not in (None, ""):
        return False
    if annotations.get(PLACEMENT_ORIGIN_UID_ANNOTATION) not in (None, ""):
        return False
    if spec.get("placement") is not None:
        return True
    return any(key in annotations for key in SELECTOR_ANNOTATIONS)


# --- reading spec.placement as Go decodes it -------------------------------------------


def _wrong(field: str, kind: str, value: object) -> PlacementIntentError:
    return PlacementIntentError(f"{field} must be {kind}, got {show(value)}")


def _string(value: object, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _wrong(field, "a string", value)
    # Go's decoder reads a lone surrogate escape as U+FFFD.
    return _SURROGATE.sub("\ufffd", value)


def _int32(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value not in _INT32:
        raise _wrong(field, "a 32-bit whole number", value)
    return value


def _object(value: object, field: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _wrong(field, "an object", value)
    return value


def _list(value: object, field: str, item: Callable[[object, str], T]) -> tuple[T, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise _wrong(field, "a list", value)
    return tuple(item(entry, f"{field}[{index}]") for index, entry in enumerate(value))


def _requirement(value: object, field: str) -> Requirement:
    block = _object(value, field) or {}
    return Requirement(
        key=_string(block.get("key"), f"{field}.key"),
        operator=_string(block.get("operator"), f"{field}.operator"),
        values=_list(block.get("values"), f"{field}.values", _string),
    )


def _term(value: object, field: str) -> AffinityTerm:
    block = _object(value, field) or {}
    weight = _int32(block.get("weight"), f"{field}.weight")
    expressions = _list(block.get("matchExpressions"), f"{field}.matchExpressions", _requirement)
    fields = _list(block.get("matchFields"), f"{field}.matchFields", _requirement)
    return AffinityTerm(
        weight=weight,
        match_expressions=expressions or (),
        match_fields=fields or (),
    )


def _duration(value: object, field: str) -> Duration | None:
    """`metav1.Duration`: a string Go's `time.ParseDuration` reads."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _wrong(field, 'a duration such as "5m"', value)
    try:
        return parse_duration(value)
    except DurationError:
        raise PlacementIntentError(not_a_duration(field, value)) from None


def _split(value: object, field: str) -> SplitIntent | None:
    block = _object(value, field)
    if block is None:
        return None
    ceiling = _int32(block.get("maxReplicasPerCluster"), f"{field}.maxReplicasPerCluster")
    return SplitIntent(
        replicas=_int32(block.get("replicas"), f"{field}.replicas"),
        max_replicas_per_cluster=ceiling or 0,
    )


def read_placement_intent(spec: Mapping[str, Any]) -> PlacementIntent | None:
    """`spec.placement` read into OME's types; None when absent or null.

    Raises `PlacementIntentError` for a value of the wrong type.
    """
    field = "spec.placement"
    block = _object(spec.get("placement"), field)
    if block is None:
        return None
    return PlacementIntent(
        policy=_string(block.get("policy"), f"{field}.policy"),
        mode=_string(block.get("mode"), f"{field}.mode"),
        cluster_affinity=_list(block.get("clusterAffinity"), f"{field}.clusterAffinity", _term),
        max_surge=_int32(block.get("maxSurge"), f"{field}.maxSurge"),
        replacement_timeout=_duration(
            block.get("replacementTimeout"), f"{field}.replacementTimeout"
        ),
        split=_split(block.get("split"), f"{field}.split"),
    )


# --- OME's checks ------------------------------------------------------------------------


def _expression_error(index: int, requirement: Requirement) -> str | None:
    values = requirement.values or ()
    if len(values) > MAX_VALUES:
        return f"matchExpressions[{index}]: at most {MAX_VALUES} values are allowed"
    if requirement.operator not in OPERATORS:
        return f"matchExpressions[{index}]: unsupported operator {quote(requirement.operator)}"
    error = requirement_error(requirement.key, requirement.operator, requirement.values)
    return None if error is None else f"matchExpressions[{index}]: {error}"


def _field_error(index: int, requirement: Requirement) -> str | None:
    if requirement.key != NAME_FIELD or requirement.operator not in ("In", "NotIn"):
        return f"matchFields[{index}]: only metadata.name with In or NotIn is supported"
    names = requirement.values or ()
    if not 1 <= len(names) <= MAX_VALUES:
        return f"matchFields[{index}]: between 1 and {MAX_VALUES} names are required"
    for name in names:
        problems = dns1123_subdomain_problems(name)
        if problems:
            shown = "[" + " ".join(problems) + "]"  # Go's %v of a []string
            return f"matchFields[{index}]: invalid WorkloadCluster name {quote(name)}: {shown}"
    return None


def _term_error(term: AffinityTerm, weights_allowed: bool) -> str | None:
    """`affinity.compileTerm`."""
    if not term.match_expressions and not term.match_fields:
        return "term must contain a label or field requirement"
    if max(len(term.match_expressions), len(term.match_fields)) > MAX_REQUIREMENTS:
        return (
            f"matchExpressions and matchFields each allow at most {MAX_REQUIREMENTS} requirements"
        )
    if term.weight is not None:
        if not weights_allowed:
            return "weight is permitted only in Split mode"
        if term.weight < 1:
            return "weight must be positive"
    for index, requirement in enumerate(term.match_expressions):
        error = _expression_error(index, requirement)
        if error is not None:
            return error
    for index, requirement in enumerate(term.match_fields):
        error = _field_error(index, requirement)
        if error is not None:
            return error
    return None


def _affinity_error(terms: tuple[AffinityTerm, ...] | None, weights_allowed: bool) -> str | None:
    """`affinity.Compile`: absent or null is no restriction, `[]` is refused."""
    if terms is None:
        return None
    if not 1 <= len(terms) <= MAX_TERMS:
        return f"clusterAffinity must contain between 1 and {MAX_TERMS} terms"
    for index, term in enumerate(terms):
        error = _term_error(term, weights_allowed)
        if error is not None:
            return f"clusterAffinity[{index}]: {error}"
    return None


def _placement_error(intent: PlacementIntent) -> str | None:
    """OME's `ValidatePlacement`, on a `spec.placement` that is set."""
    if intent.policy != CLUSTER_AFFINITY:
        return "spec.placement.policy must explicitly select ClusterAffinity"
    if intent.mode not in MODES:
        return "spec.placement.mode must explicitly select Single, All, Split, or SplitByCapacity"
    affinity = _affinity_error(intent.cluster_affinity, weights_allowed=intent.mode == SPLIT)
    if affinity is not None:
        return "spec.placement." + affinity
    if intent.max_surge is not None and intent.max_surge < 0:
        return "spec.placement.maxSurge must be nonnegative whole replicas"
    timeout = intent.replacement_timeout
    if timeout is not None and (intent.mode != SINGLE or timeout.nanoseconds <= 0):
        return "spec.placement.replacementTimeout must be positive and is permitted only for Single"
    split = intent.split
    if split is None:
        return None
    if intent.mode not in (SPLIT, SPLIT_BY_CAPACITY):
        return "spec.placement.split is permitted only for Split and SplitByCapacity"
    if split.replicas is not None and split.replicas < 1:
        return "spec.placement.split.replicas must be positive when specified"
    if split.max_replicas_per_cluster < 0:
        return "spec.placement.split.maxReplicasPerCluster must be nonnegative"
    return None


def validate_placement_intent(
    metadata: Mapping[str, Any], spec: Mapping[str, Any], plan_present: bool
) -> None:
    """OME's `ValidatePlacementIntent`; raises `PlacementIntentError` with OME's message.

    `plan_present`: `status.placement.plan` is set (not null). In order: a value of the
    wrong type in `spec.placement`; an accepted plan without `policy: ClusterAffinity`;
    an obsolete selector annotation (present, even empty); then `ValidatePlacement`.
    """
    intent = read_placement_intent(spec)
    if plan_present and (intent is None or intent.policy != CLUSTER_AFFINITY):
        raise PlacementIntentError(PLAN_NEEDS_CLUSTER_AFFINITY)
    annotations = _map(metadata.get("annotations"))
    for key in SELECTOR_ANNOTATIONS:
        if key in annotations:
            raise PlacementIntentError(ANNOTATION_UNSUPPORTED.format(key))
    if intent is None:
        return
    error = _placement_error(intent)
    if error is not None:
        raise PlacementIntentError(error)
