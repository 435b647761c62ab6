"""What to do with one InferenceService's TrafficMap: decisions, no I/O.

`plan` reads the InferenceService and its map (raw JSON) and the operator config, and
says what kind of service this is:

- `Unrouted`: routing is off for it, it is not eligible, or it is gone; reap the map when
  OME would (`reapable`).
- `NotOurs`: a TrafficMap of that name is not exactly this service's; leave it alone.
- `Frozen`: its placement, routing spec or drain annotation is unusable; write nothing
  (the last spec and the routing conditions stay), stop polling its homes, log why.
- `Routed`: the homes to poll and everything the table follows from.

The checks run in OME's order, and the first failure wins:

1. The service is gone or being deleted: `Unrouted`.
2. An accepted placement plan without `policy: ClusterAffinity`: `Frozen`, whether
   routing is on or not (so a map is not reaped while it holds).
3. Routing is off (the chart, or `spec.routing.enabled: false`) or the service is not
   eligible for placement (`core.intent.is_placement_eligible`): `Unrouted`, before any
   validation.
4. `validate placement intent: ...` (`spec.placement`, `core.intent`), then a malformed
   `status.placement` (`read placement: ...`).
5. `validate routing policy: ...`.
6. `parse ome.io/traffic-drain: ...`.
7. `resolve probe policy: ...`, then `resolve capacity policy: ...`.
8. The existing map: without this service as its exact controller, or recording another
   source UID, is `NotOurs`. So a policy error beats a foreign map.

`desired_spec` and `desired_status` then give the map's spec and status for a routed
service, given each home's verdict; the controller writes only what differs.
`same_snapshot` is OME's fence before a planned spec is written. An entry's endpoint
is written as Go's URL type writes it (`go_url_string`).

Errors: none escape; unusable input becomes a `Frozen` plan carrying the log line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ome_routing.core.capacity import Verdict
from ome_routing.core.conditions import Condition, merge_conditions
from ome_routing.core.config import OperatorConfig
from ome_routing.core.drains import ANNOTATION, DrainAnnotationError, Drains, parse_drains
from ome_routing.core.intent import is_placement_eligible, validate_placement_intent
from ome_routing.core.placement import (
    PLAN_NEEDS_CLUSTER_AFFINITY,
    Placement,
    PlacementError,
    PlacementIntentError,
    accepted_plan,
    plan_lacks_cluster_affinity,
    read_placement,
)
from ome_routing.core.policy import PolicyError, PollMode, RoutingPolicy, resolve_routing_policy
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.proberules import ProbePolicy
from ome_routing.core.probes import ProbeState, reachable
from ome_routing.core.trafficmap import (
    HomeInput,
    MapInput,
    PollingState,
    TrafficMapView,
    build_trafficmap,
    entries_to_json,
)
from ome_routing.core.weights import AllFailedPolicy
from ome_routing.kube.ownership import has_exact_controller, meta, not_ours_message, reapable
from ome_routing.kube.resources import API_VERSION
from ome_routing.observer.urls import URLError, parse_url

RawObject = Mapping[str, Any]

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
    #: OME's error when a map looks like this service's but records another source UID
    problem: str | None = None


@dataclass(frozen=True)
class NotOurs:
    message: str


@dataclass(frozen=True)
class Frozen:
    message: str


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
    def probe(self) -> ProbePolicy | None:
        """The health probe to run, None while probing is off for the service."""
        return self.policy.probe_policy

    def probe_targets(self) -> dict[str, str]:
        """cluster -> endpoint of the homes to probe (none while probing is off)."""
        if self.probe is None:
            return {}
        return {home.cluster: home.endpoint for home in self.placement.homes}

    @property
    def poll(self) -> CapacityPolicy | None:
        return self.policy.capacity if self.polling is PollingState.ON else None

    def targets(self) -> dict[str, str]:
        """cluster -> endpoint of the homes to poll (none while polling is off)."""
        if self.poll is None:
            return {}
        return {home.cluster: home.endpoint for home in self.placement.homes}


Plan = Unrouted | NotOurs | Frozen | Routed


def is_routed(isvc: RawObject, config: OperatorConfig) -> bool:
    """Routing covers an eligible service (OME's `IsPlacementEligible`), unless the chart
    turns routing off or the service opts out (`spec.routing.enabled: false`)."""
    if not config.routing_active:
        return False
    spec = isvc.get("spec") or {}
    routing = spec.get("routing")
    if isinstance(routing, Mapping) and routing.get("enabled") is False:
        return False
    return is_placement_eligible(meta(isvc), spec)


def plan(isvc: RawObject | None, tmap: RawObject | None, config: OperatorConfig) -> Plan:
    """What this service's map needs, checking in OME's order (see the module docstring).

    `isvc` is None when the service is gone; the caller confirms that with a live read,
    since an orphaned map is then reaped.
    """
    if isvc is None or meta(isvc).get("deletionTimestamp"):
        return _unrouted(isvc, tmap)
    fields = meta(isvc)
    uid = str(fields.get("uid"))
    spec = isvc.get("spec") or {}
    status = isvc.get("status") or {}
    if plan_lacks_cluster_affinity(spec, status):
        return Frozen(PLAN_NEEDS_CLUSTER_AFFINITY)
    if not is_routed(isvc, config):
        return _unrouted(isvc, tmap)
    try:
        validate_placement_intent(fields, spec, accepted_plan(status) is not None)
        placement = read_placement(spec, status)
    except PlacementIntentError as err:
        return Frozen(VALIDATE_INTENT + str(err))
    except PlacementError as err:
        return Frozen(READ_PLACEMENT + str(err))
    policy: RoutingPolicy | None = None
    policy_error: PolicyError | None = None
    try:
        policy = resolve_routing_policy(spec.get("routing"), config, spec.get("placement"))
    except PolicyError as err:
        policy_error = err
    # The policy's own rules come before the drains, and the rules that depend on this
    # build or the chart after them: `resolve_routing_policy` judges the former first.
    if policy_error is not None and str(policy_error).startswith(VALIDATE_POLICY):
        return Frozen(str(policy_error))
    try:
        drains = parse_drains((fields.get("annotations") or {}).get(ANNOTATION))
    except DrainAnnotationError as err:
        return Frozen(str(err))
    if policy_error is not None:
        return Frozen(str(policy_error))
    assert policy is not None
    if tmap is not None:
        foreign = not_ours_message(tmap, str(fields.get("name")), uid)
        if foreign is not None:
            return NotOurs(foreign)
    return Routed(uid, int(fields.get("generation") or 0), placement, policy, drains)


def _unrouted(isvc: RawObject | None, tmap: RawObject | None) -> Unrouted:
    delete, problem = reapable(isvc, tmap)
    return Unrouted(delete_map=delete, problem=problem)


def build_view(
    routed: Routed,
    verdicts: Mapping[str, Verdict | None],
    probes: Mapping[str, tuple[ProbeState, str]] | None = None,
) -> TrafficMapView:
    """The table and conditions; `probes` is cluster -> (probe state, policy digest)."""
    polling = routed.polling
    probe_policy = routed.probe
    probes = probes if probes is not None and probe_policy is not None else {}
    homes = tuple(
        HomeInput(
            cluster=home.cluster,
            endpoint=home.endpoint,
            admitted=home.admitted,
            ready=home.ready,
            factor=routed.policy.capacity_factors.get(home.cluster),
            capacity=verdicts.get(home.cluster) if polling is PollingState.ON else None,
            probe_gated=reachable(probe[0] if probe else None) is False,
            plan_drained=home.plan_drained,
            probe=probe,
        )
        for home in routed.placement.homes
        for probe in (probes.get(home.cluster),)
    )
    return build_trafficmap(
        MapInput(
            placed=routed.placement.placed,
            homes=homes,
            polling=polling,
            drains=routed.drains,
            all_failed_policy=(
                AllFailedPolicy(probe_policy.all_failed_policy)
                if probe_policy is not None
                else None
            ),
        )
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
    for entry in entries:
        if "endpoint" in entry:
            entry["endpoint"] = go_url_string(entry["endpoint"])
    if entries:
        spec["entries"] = entries
    return spec


def go_url_string(endpoint: str) -> str:
    """The endpoint as OME writes it into an entry: parsed by Go's `url.Parse` and written
    by `URL.String()` (a lower-case scheme, an escaped path). A text Go cannot parse is
    kept as it is (OME could not have decoded the InferenceService at all)."""
    try:
        return str(parse_url(endpoint))
    except URLError:
        return endpoint


def spec_patch(tmap: RawObject, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch that replaces the map's whole spec with `spec`, on the condition
    that the map is still at the resourceVersion it was read at.

    A merge patch keeps every key that it does not name, so a field that `spec` leaves
    out (an emptied table, a mode removed from the placement) is set to null, which
    removes it; lists such as `entries` are replaced whole. The resourceVersion makes the
    API server refuse (409) a write computed from a map someone has written since.
    """
    stored = tmap.get("spec") or {}
    removed = {key: None for key in stored if key not in spec}
    return {
        "metadata": {"resourceVersion": meta(tmap).get("resourceVersion")},
        "spec": {**removed, **spec},
    }


def new_map(namespace: str, name: str, uid: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A new map, controlled by its service and labelled with nothing, as OME makes it."""
    return {
        "apiVersion": API_VERSION,
        "kind": "TrafficMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
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


#: The conditions the routing controller owns, in the order OME applies them.
ROUTING_CONDITIONS = ("Routable", "CapacityFallback", "OverrideActive")


def desired_status(
    tmap: RawObject, uid: str, conditions: Sequence[Condition], now: datetime
) -> dict[str, Any]:
    """The map's status with `conditions` merged in (times kept where nothing changed).

    A map that the service `uid` does not control exactly keeps its status as it is:
    nothing is written to it. `published` is the publisher's, and OME leaves it out while
    false, so it is not written here.
    """
    status = dict(tmap.get("status") or {})
    if not has_exact_controller(tmap, str(meta(tmap).get("name")), uid):
        return status
    generation = int(meta(tmap).get("generation") or 0)
    status["conditions"] = merge_conditions(
        status.get("conditions") or [], conditions, now, generation
    )
    status["sourceUID"] = uid
    return status


def status_apply(tmap: RawObject, status: Mapping[str, Any]) -> dict[str, Any]:
    """The server-side apply of the routing controller's part of `status`, as OME sends it
    (field owner `ome-trafficmap-routing`): `sourceUID` and the routing conditions, on the
    condition that the map is still at the resourceVersion it was read at. The publisher's
    `Published` condition and journal are its own and stay out."""
    fields = meta(tmap)
    owned = [
        c for t in ROUTING_CONDITIONS for c in status.get("conditions") or [] if c["type"] == t
    ]
    body: dict[str, Any] = {}
    if status.get("sourceUID"):
        body["sourceUID"] = status["sourceUID"]
    if owned:
        body["conditions"] = owned
    return {
        "apiVersion": API_VERSION,
        "kind": "TrafficMap",
        "metadata": {
            "name": fields.get("name"),
            "namespace": fields.get("namespace"),
            "resourceVersion": fields.get("resourceVersion"),
        },
        "status": body,
    }


def routed_conditions(view: TrafficMapView) -> list[Condition]:
    """The routing conditions; `Published` is the publisher's (`kube.publisher`)."""
    return list(view.conditions)
