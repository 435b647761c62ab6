"""What to do with one InferenceService's TrafficMap: decisions, no I/O.

`plan` reads the InferenceService and its map (raw JSON) and the operator config, and
says what kind of service this is:

- `Unrouted`: routing is off for it (or it is gone); delete our map if there is one.
- `NotOurs`: a TrafficMap of that name is controlled by something else; leave it alone.
- `Frozen`: its routing spec, drain annotation or placement status is unusable; keep the
  last table, stop polling its homes, and say so in `Published` (reason `InvalidOwner`).
- `Routed`: the homes to poll and everything the table follows from.

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
from ome_routing.core.placement import Placement, PlacementError, read_placement
from ome_routing.core.policy import PolicyError, PollMode, RoutingPolicy, resolve_routing_policy
from ome_routing.core.pollrules import CapacityPolicy
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
#: No publisher runs in this project, so a map is never published to a gateway.
WITHDRAWN = Condition(
    PUBLISHED, FALSE, "Withdrawn", "no global endpoint is configured, so the table is not published"
)
INVALID_OWNER = Condition(
    PUBLISHED,
    FALSE,
    "InvalidOwner",
    "the InferenceService's routing spec cannot be used; the table keeps its last weights "
    "until it is fixed (the controller log has the error)",
)

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


def plan(isvc: RawObject | None, tmap: RawObject | None, config: OperatorConfig) -> Plan:
    if isvc is None or not is_routed(isvc, config):
        owner = controller_uid(tmap) if tmap is not None else None
        ours = owner is not None and (isvc is None or owner == _meta(isvc).get("uid"))
        return Unrouted(delete_map=ours)
    meta = _meta(isvc)
    uid = str(meta.get("uid"))
    if tmap is not None and controller_uid(tmap) != uid:
        return NotOurs(
            f"TrafficMap {meta.get('namespace')}/{meta.get('name')} exists but is not controlled by "
            f"InferenceService UID {uid}"
        )
    spec = isvc.get("spec") or {}
    try:
        policy = resolve_routing_policy(spec.get("routing"), config)
        drains = parse_drains((meta.get("annotations") or {}).get(ANNOTATION))
        placement = read_placement(spec, isvc.get("status") or {})
    except (PolicyError, DrainAnnotationError) as err:
        return Frozen(str(err), uid)
    except PlacementError as err:
        return Frozen(f"read placement: {err}", uid)
    return Routed(uid, int(meta.get("generation") or 0), placement, policy, drains)


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
    return {
        "service": name,
        "mode": routed.placement.mode,
        "observedISVCGeneration": routed.generation,
        "entries": entries_to_json(view),
    }


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
    """The map's status with `conditions` merged in (times kept where nothing changed)."""
    status = dict(tmap.get("status") or {})
    generation = int(_meta(tmap).get("generation") or 0)
    status["conditions"] = merge_conditions(
        status.get("conditions") or [], conditions, now, generation
    )
    status["sourceUID"] = uid
    status["published"] = False
    return status


def routed_conditions(view: TrafficMapView) -> list[Condition]:
    return [*view.conditions, WITHDRAWN]
