"""What to do with one InferenceService's TrafficMap: decisions, no I/O.

`plan` reads the InferenceService and its map (raw JSON) and the operator config, and
says what kind of service this is:

- `Unrouted`: routing is off for it (or it is gone); delete our map if there is one.
- `NotOurs`: a TrafficMap of that name is controlled by something else; leave it alone.
- `Frozen`: its placement, routing spec or drain annotation is unusable; keep the
  last table, stop polling its homes, and say so in `Published` (reason `InvalidOwner`).
- `Routed`: the homes to poll and everything the table follows from.

The checks run in OME's order, and the first failure wins:

1. The service is gone or being deleted: `Unrouted`.
2. An accepted placement plan without `policy: ClusterAffinity`: `Frozen`.
3. Routing is off (the chart, or `spec.routing.enabled: false`) or the service has no
   `spec.placement`: `Unrouted`, before any validation.
4. `validate placement intent: ...` (`spec.placement`), then a malformed
   `status.placement` (`read placement: ...`).
5. `validate routing policy: ...`.
6. `parse ome.io/traffic-drain: ...`.
7. `resolve capacity policy: ...`.
8. The existing map: controlled by another owner, or recording another source UID,
   is `NotOurs`. So a policy error beats a foreign map.

`desired_spec` and `desired_status` then give the map's spec and status for a routed
service, given each home's verdict; the controller writes only what differs.

Errors: none escape; unusable input becomes a `Frozen` plan carrying the log line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ome_routing.core.capacity import Verdict
from ome_routing.core.conditions import FALSE, Condition, merge_conditions
from ome_routing.core.config import OperatorConfig
from ome_routing.core.drains import ANNOTATION, DrainAnnotationError, Drains, parse_drains
from ome_routing.core.placement import (
    PLAN_NEEDS_CLUSTER_AFFINITY,
    Placement,
    PlacementError,
    PlacementIntentError,
    plan_lacks_cluster_affinity,
    read_placement,
)
from ome_routing.core.policy import PolicyError, PollMode, RoutingPolicy, resolve_routing_policy
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.quoting import quote
from ome_routing.core.trafficmap import (
    HomeInput,
    MapInput,
    PollingState,
    TrafficMapView,
    build_trafficmap,
    entries_to_json,
)
from ome_routing.kube.resources import API_VERSION

RawObject = Mapping[str, Any]

PUBLISHED = "Published"
#: OME's publisher reports a map whose owner it can't trust (here: a frozen map) so.
INVALID_OWNER = Condition(
    PUBLISHED, FALSE, "InvalidOwner", "TrafficMap owner identity is invalid or stale"
)
#: OME wraps these as the steps of its reconcile.
VALIDATE_INTENT = "validate placement intent: "
VALIDATE_POLICY = "validate routing policy: "
READ_PLACEMENT = "read placement: "

_POLLING_STATE = {
    PollMode.SERVICE: PollingState.ON,
    PollMode.CHART: PollingState.ON,
    PollMode.DISABLED: PollingState.DISABLED,
    PollMode.NOT_CONFIGURED: PollingState.NOT_CONFIGURED,
}


@dataclass(frozen=True)
class Unrouted:
    delete_map: bool


@dataclass(frozen=True)
class NotOurs:
    message: str


@dataclass(frozen=True)
class Frozen:
    message: str
    uid: str


@dataclass(frozen=True)
class Routed:
    uid: str
    generation: int
    placement: Placement
    policy: RoutingPolicy
    drains: Drains

    @property
    def polling(self) -> PollingState:
        return _POLLING_STATE[self.policy.poll_mode]

    @property
    def poll(self) -> CapacityPolicy | None:
        return self.policy.capacity if self.polling is PollingState.ON else None

    def targets(self) -> dict[str, str]:
        """cluster -> endpoint of the homes to poll (none while polling is off)."""
        if self.poll is None:
            return {}
        return {home.cluster: home.endpoint for home in self.placement.homes}


Plan = Unrouted | NotOurs | Frozen | Routed


def _meta(obj: RawObject | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def controller_uid(tmap: RawObject) -> str | None:
    """The UID of the InferenceService that controls the map, if one does."""
    for ref in _meta(tmap).get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == "InferenceService"
            and ref.get("apiVersion") == API_VERSION
        ):
            return str(ref.get("uid"))
    return None


def is_routed(isvc: RawObject, config: OperatorConfig) -> bool:
    """Routing covers a service with a `spec.placement` block, unless it opts out."""
    if not config.routing_active:
        return False
    spec = isvc.get("spec") or {}
    routing = spec.get("routing")
    if isinstance(routing, Mapping) and routing.get("enabled") is False:
        return False
    return isinstance(spec.get("placement"), Mapping)


def not_ours_message(tmap: RawObject, uid: str) -> str | None:
    """OME's error for a map that this service (UID `uid`) does not own, else None."""
    meta = _meta(tmap)
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    if controller_uid(tmap) != uid:
        return f"TrafficMap {key} exists but is not controlled by InferenceService UID {quote(uid)}"
    source = (tmap.get("status") or {}).get("sourceUID")
    if source and source != uid:
        return (
            f"TrafficMap {key} source UID {quote(str(source))} does not match "
            f"InferenceService UID {quote(uid)}"
        )
    return None


def plan(isvc: RawObject | None, tmap: RawObject | None, config: OperatorConfig) -> Plan:
    """What this service's map needs, checking in OME's order (see the module docstring)."""
    if isvc is None or _meta(isvc).get("deletionTimestamp"):
        return _unrouted(isvc, tmap)
    meta = _meta(isvc)
    uid = str(meta.get("uid"))
    spec = isvc.get("spec") or {}
    status = isvc.get("status") or {}
    if config.routing_active and plan_lacks_cluster_affinity(spec, status):
        return Frozen(PLAN_NEEDS_CLUSTER_AFFINITY, uid)
    if not is_routed(isvc, config):
        return _unrouted(isvc, tmap)
    try:
        placement = read_placement(spec, status)
    except PlacementIntentError as err:
        return Frozen(VALIDATE_INTENT + str(err), uid)
    except PlacementError as err:
        return Frozen(READ_PLACEMENT + str(err), uid)
    policy: RoutingPolicy | None = None
    policy_error: PolicyError | None = None
    try:
        policy = resolve_routing_policy(spec.get("routing"), config, spec.get("placement"))
    except PolicyError as err:
        policy_error = err
    # The policy's own rules come before the drains, and the rules that depend on this
    # build or the chart after them: `resolve_routing_policy` judges the former first.
    if policy_error is not None and str(policy_error).startswith(VALIDATE_POLICY):
        return Frozen(str(policy_error), uid)
    try:
        drains = parse_drains((meta.get("annotations") or {}).get(ANNOTATION))
    except DrainAnnotationError as err:
        return Frozen(str(err), uid)
    if policy_error is not None:
        return Frozen(str(policy_error), uid)
    assert policy is not None
    if tmap is not None:
        foreign = not_ours_message(tmap, uid)
        if foreign is not None:
            return NotOurs(foreign)
    return Routed(uid, int(meta.get("generation") or 0), placement, policy, drains)


def _unrouted(isvc: RawObject | None, tmap: RawObject | None) -> Unrouted:
    owner = controller_uid(tmap) if tmap is not None else None
    ours = owner is not None and (isvc is None or owner == _meta(isvc).get("uid"))
    return Unrouted(delete_map=ours)


def build_view(routed: Routed, verdicts: Mapping[str, Verdict | None]) -> TrafficMapView:
    polling = routed.polling
    homes = tuple(
        HomeInput(
            cluster=home.cluster,
            endpoint=home.endpoint,
            admitted=home.admitted,
            ready=home.ready,
            factor=routed.policy.capacity_factors.get(home.cluster),
            capacity=verdicts.get(home.cluster) if polling is PollingState.ON else None,
        )
        for home in routed.placement.homes
    )
    return build_trafficmap(
        MapInput(placed=routed.placement.placed, homes=homes, polling=polling, drains=routed.drains)
    )


def desired_spec(name: str, routed: Routed, view: TrafficMapView) -> dict[str, Any]:
    """The map's spec, omitting what OME omits: an unset plan ID, mode or generation,
    and an empty table."""
    spec: dict[str, Any] = {}
    if routed.placement.plan_id:
        spec["placementPlanID"] = routed.placement.plan_id
    spec["service"] = name
    if routed.placement.mode:
        spec["mode"] = routed.placement.mode
    if routed.generation:
        spec["observedISVCGeneration"] = routed.generation
    entries = entries_to_json(view)
    if entries:
        spec["entries"] = entries
    return spec


def spec_patch(tmap: RawObject, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch that replaces the map's whole spec with `spec`.

    A merge patch keeps every key that it does not name, so a field that `spec` leaves
    out (an emptied table, a mode removed from the placement) is set to null, which
    removes it; lists such as `entries` are replaced whole.
    """
    stored = tmap.get("spec") or {}
    removed = {key: None for key in stored if key not in spec}
    return {"spec": {**removed, **spec}}


def new_map(namespace: str, name: str, uid: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "TrafficMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "ome-routing"},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "InferenceService",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": dict(spec),
    }


def desired_status(
    tmap: RawObject, uid: str, conditions: Sequence[Condition], now: datetime
) -> dict[str, Any]:
    """The map's status with `conditions` merged in (times kept where nothing changed).

    A map that the service `uid` does not control keeps its status as it is: nothing
    is written to it. `published` is the publisher's, and OME leaves it out while false,
    so it is not written here.
    """
    status = dict(tmap.get("status") or {})
    if controller_uid(tmap) != uid:
        return status
    generation = int(_meta(tmap).get("generation") or 0)
    status["conditions"] = merge_conditions(
        status.get("conditions") or [], conditions, now, generation
    )
    status["sourceUID"] = uid
    return status


def routed_conditions(view: TrafficMapView) -> list[Condition]:
    """The routing conditions; `Published` is the publisher's (`kube.publisher`)."""
    return list(view.conditions)
