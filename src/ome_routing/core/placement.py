"""Which workload clusters are an InferenceService's homes, read from its placement.

The placement controller (not part of this project) writes `status.placement`: a `phase`,
one candidate per workload cluster it considered, and, once a plan is accepted, `plan`
with its `id`, its `mode`, the committed `winner` of a Single race and a `singleMove`, and
an `allocation` on each candidate. The homes are OME's `servingCandidates`, and only
while the placement `phase` is `Placed`:

1. With a plan, a retired allocation (0 current and 0 desired replicas, no current and no
   desired home) is skipped, whatever its phase and endpoint still say.
2. In a plan whose `mode` is `Single`, only the committed winner is a home, plus the target
   a move selected (`singleMove.selected`), plus, while a move back to the winner cancels
   another, a retained home: one with current replicas that is neither a race candidate
   nor asked to drain. While `winner` is empty (the race is not decided) nothing is.
3. Of the rest, a candidate is a home when its `phase` is `Admitted` and it reports an
   `endpoint` with a host.

A home whose allocation has `drainRequested: true` (with a plan) keeps its entry and
gets weight 0 (`PlacedHome.plan_drained`). The same homes are polled and probed.

`spec.placement` is the intent: its `mode` is copied to the TrafficMap as written (no
default); `core.intent` validates it.

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
SINGLE = "Single"
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
    #: The accepted plan asks this home to drain (`allocation.drainRequested`): weight 0.
    plan_drained: bool = False


@dataclass(frozen=True, slots=True)
class Placement:
    """The placement facts routing needs: whether it is placed, and the homes."""

    #: `spec.placement.mode` as written; None when it has none.
    mode: str | None
    placed: bool
    homes: tuple[PlacedHome, ...]
    #: `status.placement.plan.id`, while a plan is accepted and has one.
    plan_id: str | None = None


@dataclass(frozen=True, slots=True)
class _Plan:
    """The parts of an accepted plan that decide the homes."""

    mode: str | None
    winner: str | None
    #: `singleMove.selected`; None without a move (or with an empty selection)
    selected: str | None


@dataclass(frozen=True, slots=True)
class _Allocation:
    current: int
    desired: int
    has_current_home: bool
    has_desired_home: bool
    race_candidate: bool
    drain_requested: bool

    @property
    def retired(self) -> bool:
        return not (self.current or self.desired or self.has_current_home or self.has_desired_home)


def _count(candidate: Mapping[str, Any], field: str, where: str) -> int:
    value = candidate.get(field, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlacementError(f"{where}.{field} must be a whole number 0 or more, got {value!r}")
    return value


def _flag(block: Mapping[str, Any], field: str, where: str) -> bool:
    value = block.get(field)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise PlacementError(f"{where}.{field} must be true or false, got {value!r}")
    return value


def _object(block: Mapping[str, Any], field: str, where: str) -> Mapping[str, Any] | None:
    value = block.get(field)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise PlacementError(f"{where}.{field} must be an object, got {value!r}")
    return value


def _text(
    block: Mapping[str, Any], field: str, where: str, error: type[PlacementError] = PlacementError
) -> str | None:
    value = block.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise error(f"{where}.{field} must be a string, got {value!r}")
    return value


def _spec_placement(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    placement = spec.get("placement")
    if placement is None:
        return {}
    if not isinstance(placement, Mapping):
        raise PlacementIntentError(f"spec.placement must be an object, got {placement!r}")
    return placement


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


def _read_plan(placement: Mapping[str, Any]) -> tuple[_Plan | None, str | None]:
    """The accepted plan's routing parts and its id; (None, None) without a plan."""
    where = "status.placement.plan"
    plan = _object(placement, "plan", "status.placement")
    if plan is None:
        return None, None
    plan_id = _text(plan, "id", where)
    move = _object(plan, "singleMove", where)
    return (
        _Plan(
            mode=_text(plan, "mode", where),
            winner=_text(plan, "winner", where),
            selected=_text(move, "selected", f"{where}.singleMove") if move else None,
        ),
        plan_id,
    )


def _read_allocation(candidate: Mapping[str, Any], where: str) -> _Allocation | None:
    allocation = _object(candidate, "allocation", where)
    if allocation is None:
        return None
    where = f"{where}.allocation"
    return _Allocation(
        current=_count(allocation, "currentReplicas", where),
        desired=_count(allocation, "desiredReplicas", where),
        has_current_home=_object(allocation, "currentHome", where) is not None,
        has_desired_home=_object(allocation, "desiredHome", where) is not None,
        race_candidate=_flag(allocation, "raceCandidate", where),
        drain_requested=_flag(allocation, "drainRequested", where),
    )


def _serves(plan: _Plan | None, cluster: str, allocation: _Allocation | None) -> bool:
    """Steps 1 and 2 of the module docstring: whether the plan lets this candidate serve."""
    if plan is None:
        return True
    if allocation is not None and allocation.retired:
        return False
    if plan.mode != SINGLE or cluster == plan.winner:
        return True
    if plan.winner is None:
        return False  # the race is not decided: nobody is routed
    retained = (
        plan.selected == plan.winner
        and allocation is not None
        and not allocation.race_candidate
        and allocation.current > 0
        and not allocation.drain_requested
    )
    return retained or (plan.selected is not None and plan.selected == cluster)


def read_placement(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Placement:
    """The mode, phase, plan and homes of an InferenceService, from its `spec` and `status`.

    Raises `PlacementIntentError` for a malformed `spec.placement` (checked first), and
    `PlacementError` for a malformed `status.placement`.
    """
    intent = _spec_placement(spec)
    mode = _text(intent, "mode", "spec.placement", PlacementIntentError)
    _text(intent, "policy", "spec.placement", PlacementIntentError)
    placement = _status_placement(status)
    plan, plan_id = _read_plan(placement)
    placed = placement.get("phase") == PLACED
    candidates = placement.get("candidates") or []
    if not isinstance(candidates, Sequence) or isinstance(candidates, str):
        raise PlacementError(f"status.placement.candidates must be a list, got {candidates!r}")
    homes: dict[str, PlacedHome] = {}
    if placed:
        for index, candidate in enumerate(candidates):
            where = f"status.placement.candidates[{index}]"
            if not isinstance(candidate, Mapping):
                raise PlacementError(f"{where} must be an object, got {candidate!r}")
            cluster = candidate.get("cluster")
            endpoint = candidate.get("endpoint") or ""
            if candidate.get("phase") != ADMITTED or not endpoint:
                continue
            if not isinstance(cluster, str) or not cluster:
                raise PlacementError(f"{where}.cluster must be a name, got {cluster!r}")
            allocation = _read_allocation(candidate, where) if plan is not None else None
            if not _serves(plan, cluster, allocation):
                continue
            if not isinstance(endpoint, str):
                raise PlacementError(f"{where}.endpoint must be a URL, got {endpoint!r}")
            if not _has_host(endpoint):
                continue
            if cluster in homes:
                raise PlacementError(f"{where}.cluster {cluster!r} appears twice")
            homes[cluster] = PlacedHome(
                cluster=cluster,
                endpoint=endpoint,
                admitted=_count(candidate, "admittedReplicas", where),
                ready=_count(candidate, "readyReplicas", where),
                plan_drained=allocation is not None and allocation.drain_requested,
            )
    return Placement(
        mode=mode,
        placed=placed,
        homes=tuple(sorted(homes.values(), key=lambda h: h.cluster)),
        plan_id=plan_id,
    )
