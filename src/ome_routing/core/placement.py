"""Which workload clusters are an InferenceService's homes, read from its placement.

The placement controller (not part of this project) writes `status.placement`: a `phase`,
one candidate per workload cluster it considered, and, once a plan is accepted, `plan`
with its `id`. A candidate is a home when its `phase` is `Admitted` and it reports an
`endpoint` with a host, and only while the placement `phase` is `Placed`.

`spec.placement` is the intent: its `mode` is copied to the TrafficMap as written (no
default), and an accepted plan requires `policy: ClusterAffinity`, as OME's routing
controller checks.

Raw Kubernetes JSON comes in as plain mappings; a field of the wrong type is an error that
names the field and the value, so that one bad object stops one map:
`PlacementIntentError` for `spec.placement`, `PlacementError` for `status.placement`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

PLACED = "Placed"
ADMITTED = "Admitted"
CLUSTER_AFFINITY = "ClusterAffinity"
#: OME's routing controller, when `status.placement.plan` is set and the policy is another.
PLAN_NEEDS_CLUSTER_AFFINITY = (
    "an accepted placement plan requires spec.placement.policy: ClusterAffinity"
)


class PlacementError(ValueError):
    """`status.placement` holds a value of the wrong shape."""


class PlacementIntentError(PlacementError):
    """`spec.placement` holds a value of the wrong shape."""


@dataclass(frozen=True, slots=True)
class PlacedHome:
    """One admitted cluster with an endpoint."""

    cluster: str
    endpoint: str
    admitted: int
    ready: int


@dataclass(frozen=True, slots=True)
class Placement:
    """The placement facts routing needs: whether it is placed, and the homes."""

    #: `spec.placement.mode` as written; None when it has none.
    mode: str | None
    placed: bool
    homes: tuple[PlacedHome, ...]
    #: `status.placement.plan.id`, while a plan is accepted and has one.
    plan_id: str | None = None


def _count(candidate: Mapping[str, Any], field: str, index: int) -> int:
    value = candidate.get(field, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlacementError(
            f"status.placement.candidates[{index}].{field} must be a whole number 0 or more, got {value!r}"
        )
    return value


def _spec_placement(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    placement = spec.get("placement")
    if placement is None:
        return {}
    if not isinstance(placement, Mapping):
        raise PlacementIntentError(f"spec.placement must be an object, got {placement!r}")
    return placement


def _optional_text(block: Mapping[str, Any], field: str, where: str) -> str | None:
    value = block.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PlacementIntentError(f"{where}.{field} must be a string, got {value!r}")
    return value


def _status_placement(status: Mapping[str, Any]) -> Mapping[str, Any]:
    placement = status.get("placement") or {}
    if not isinstance(placement, Mapping):
        raise PlacementError(f"status.placement must be an object, got {placement!r}")
    return placement


def accepted_plan(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`status.placement.plan`, when the placement controller has accepted one."""
    placement = status.get("placement")
    plan = placement.get("plan") if isinstance(placement, Mapping) else None
    return plan if isinstance(plan, Mapping) else None


def plan_lacks_cluster_affinity(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """A plan is accepted, but `spec.placement.policy` is not `ClusterAffinity`."""
    if accepted_plan(status) is None:
        return False
    placement = spec.get("placement")
    policy = placement.get("policy") if isinstance(placement, Mapping) else None
    return policy != CLUSTER_AFFINITY


def _has_host(endpoint: str) -> bool:
    try:
        return bool(urlsplit(endpoint).hostname)
    except ValueError:
        return False


def read_placement(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Placement:
    """The mode, phase, plan and homes of an InferenceService, from its `spec` and `status`.

    Raises `PlacementIntentError` for a malformed `spec.placement` (checked first), and
    `PlacementError` for a malformed `status.placement`.
    """
    intent = _spec_placement(spec)
    mode = _optional_text(intent, "mode", "spec.placement")
    _optional_text(intent, "policy", "spec.placement")
    placement = _status_placement(status)
    plan = accepted_plan(status)
    plan_id = plan.get("id") if plan is not None else None
    if plan_id is not None and not isinstance(plan_id, str):
        raise PlacementError(f"status.placement.plan.id must be a string, got {plan_id!r}")
    placed = placement.get("phase") == PLACED
    candidates = placement.get("candidates") or []
    if not isinstance(candidates, Sequence) or isinstance(candidates, str):
        raise PlacementError(f"status.placement.candidates must be a list, got {candidates!r}")
    homes: dict[str, PlacedHome] = {}
    if placed:
        for index, candidate in enumerate(candidates):
            if not isinstance(candidate, Mapping):
                raise PlacementError(
                    f"status.placement.candidates[{index}] must be an object, got {candidate!r}"
                )
            cluster = candidate.get("cluster")
            endpoint = candidate.get("endpoint") or ""
            if candidate.get("phase") != ADMITTED or not endpoint:
                continue
            if not isinstance(cluster, str) or not cluster:
                raise PlacementError(
                    f"status.placement.candidates[{index}].cluster must be a name, got {cluster!r}"
                )
            if not isinstance(endpoint, str):
                raise PlacementError(
                    f"status.placement.candidates[{index}].endpoint must be a URL, got {endpoint!r}"
                )
            if not _has_host(endpoint):
                continue
            if cluster in homes:
                raise PlacementError(
                    f"status.placement.candidates[{index}].cluster {cluster!r} appears twice"
                )
            homes[cluster] = PlacedHome(
                cluster=cluster,
                endpoint=endpoint,
                admitted=_count(candidate, "admittedReplicas", index),
                ready=_count(candidate, "readyReplicas", index),
            )
    return Placement(
        mode=mode,
        placed=placed,
        homes=tuple(sorted(homes.values(), key=lambda h: h.cluster)),
        plan_id=plan_id or None,
    )
