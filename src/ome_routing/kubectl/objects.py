"""InferenceServices and TrafficMaps decoded as OME's typed client decodes them.

OME's CLI reads objects into Go structs: a field of the wrong JSON type, an int32 out of
range, a URL that `url.Parse` refuses, a time that is not RFC 3339 or a quantity that is
not one makes the whole read fail. `read_isvc` and `read_trafficmap` do the same for the
fields the plugin uses, raising `Unreadable`; unknown fields are ignored, absent ones
take Go's zero value. The decoded objects keep only what the reports need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ome_routing.core.quantity import Quantity
from ome_routing.kubectl.decode import (
    Meta,
    Unreadable,
    array,
    boolean,
    integer,
    obj,
    optional_integer,
    quantity,
    read_meta,
    string,
    strings,
    time,
    url,
)
from ome_routing.kubectl.gourl import GoURL

__all__ = [
    "Candidate",
    "Capacity",
    "Condition",
    "Entry",
    "Isvc",
    "OwnerRef",
    "Probe",
    "TrafficMap",
    "Unreadable",
    "read_isvc",
    "read_trafficmap",
]

# --- InferenceService -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Autoscaling:
    policies: tuple[tuple[str, str], ...]
    components: dict[str, tuple[str, bool]]
    ready: bool


@dataclass(frozen=True, slots=True)
class Rollout:
    active_run_id: str
    groups: tuple[tuple[str, str, str], ...]
    last_run: tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class Candidate:
    cluster: str
    phase: str
    endpoint: GoURL | None
    admitted: int
    ready: int
    autoscaling: Autoscaling | None
    rollout: Rollout | None
    #: The candidate as read, for telling equal duplicates from conflicting ones.
    raw: Mapping[str, Any] = field(compare=False)


@dataclass(frozen=True, slots=True)
class Isvc:
    meta: Meta
    has_placement: bool
    mode: str
    split: tuple[int | None, int] | None
    url: GoURL | None
    placement: Mapping[str, Any] | None
    phase: str
    cluster: str
    endpoint: GoURL | None
    candidates: tuple[Candidate, ...]
    conditions: int
    components: int


def _autoscaling(block: Mapping[str, Any]) -> Autoscaling:
    policies = tuple(
        (string(item, "name"), string(item, "portableDigest"))
        for item in (obj(p, "policies") for p in array(block, "policies"))
    )
    components = {
        key: (string(item, "resolvedDigest"), boolean(item, "ready"))
        for key, item in (
            (key, obj(value, "components"))
            for key, value in obj(block.get("components"), "components").items()
        )
    }
    return Autoscaling(policies, components, boolean(block, "ready"))


def _rollout(block: Mapping[str, Any]) -> Rollout:
    groups = tuple(
        (string(item, "source"), string(item, "policyName"), string(item, "portableDigest"))
        for item in (obj(g, "activeGroups") for g in array(block, "activeGroups"))
    )
    last = block.get("lastRun")
    last_run = None
    if last is not None:
        last_block = obj(last, "lastRun")
        last_run = (string(last_block, "outcome"), string(last_block, "digest"))
    return Rollout(string(block, "activeRunID"), groups, last_run)


def _candidate(raw: object) -> Candidate:
    block = obj(raw, "candidates")
    autoscaling = block.get("autoscaling")
    rollout = block.get("rollout")
    return Candidate(
        cluster=string(block, "cluster"),
        phase=string(block, "phase"),
        endpoint=url(block, "endpoint"),
        admitted=integer(block, "admittedReplicas"),
        ready=integer(block, "readyReplicas"),
        autoscaling=None if autoscaling is None else _autoscaling(obj(autoscaling, "autoscaling")),
        rollout=None if rollout is None else _rollout(obj(rollout, "rollout")),
        raw=block,
    )


def read_isvc(raw: Mapping[str, Any]) -> Isvc:
    meta = read_meta(raw)
    spec = obj(raw.get("spec"), "spec")
    status = obj(raw.get("status"), "status")
    placement_raw = spec.get("placement")
    placement = None if placement_raw is None else obj(placement_raw, "placement")
    split = None
    mode = ""
    if placement is not None:
        mode = string(placement, "mode")
        split_raw = placement.get("split")
        if split_raw is not None:
            block = obj(split_raw, "split")
            split = (optional_integer(block, "replicas"), integer(block, "maxReplicasPerCluster"))
    status_placement_raw = status.get("placement")
    status_placement = (
        None if status_placement_raw is None else obj(status_placement_raw, "status.placement")
    )
    placed = status_placement or {}
    return Isvc(
        meta=meta,
        has_placement=placement is not None,
        mode=mode,
        split=split,
        url=url(status, "url"),
        placement=status_placement,
        phase=string(placed, "phase"),
        cluster=string(placed, "cluster"),
        endpoint=url(placed, "endpoint"),
        candidates=tuple(_candidate(item) for item in array(placed, "candidates")),
        conditions=len(array(status, "conditions")),
        components=len(obj(status.get("components"), "components")),
    )


# --- TrafficMap -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True, slots=True)
class Capacity:
    allocated: int
    ready: int
    reported: int | None
    source: str
    factor: Quantity | None
    fallback_reason: str


@dataclass(frozen=True, slots=True)
class Probe:
    result: str
    consecutive_failures: int
    last_probe_time: datetime | None
    message: str
    policy_digest: str
    gated: bool


@dataclass(frozen=True, slots=True)
class Entry:
    cluster: str
    endpoint: GoURL | None
    weight: int
    healthy: bool
    drain_refs: tuple[str, ...]
    capacity: Capacity | None
    probe: Probe | None

    def base(self) -> Entry:
        """The entry without the fields a duplicate may merge (drains, digest, gate, reason)."""
        probe = self.probe and replace(self.probe, policy_digest="", gated=False)
        capacity = self.capacity and replace(self.capacity, fallback_reason="")
        return replace(self, drain_refs=(), probe=probe, capacity=capacity)


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    observed_generation: int
    last_transition_time: datetime | None
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class TrafficMap:
    meta: Meta
    owners: tuple[OwnerRef, ...]
    service: str
    mode: str
    observed_isvc_generation: int
    entries: tuple[Entry, ...]
    conditions: tuple[Condition, ...]
    published: bool
    observed_generation: int
    gateway: tuple[str, str, str, str] | None


def _entry(raw: object) -> Entry:
    block = obj(raw, "entries")
    capacity_raw = block.get("capacity")
    capacity = None
    if capacity_raw is not None:
        cap = obj(capacity_raw, "capacity")
        capacity = Capacity(
            allocated=integer(cap, "allocated"),
            ready=integer(cap, "ready"),
            reported=optional_integer(cap, "reported"),
            source=string(cap, "source"),
            factor=quantity(cap, "factor"),
            fallback_reason=string(cap, "fallbackReason"),
        )
    probe_raw = block.get("probe")
    probe = None
    if probe_raw is not None:
        pr = obj(probe_raw, "probe")
        probe = Probe(
            result=string(pr, "result"),
            consecutive_failures=integer(pr, "consecutiveFailures"),
            last_probe_time=time(pr, "lastProbeTime"),
            message=string(pr, "message"),
            policy_digest=string(pr, "policyDigest"),
            gated=boolean(pr, "gated"),
        )
    return Entry(
        cluster=string(block, "cluster"),
        endpoint=url(block, "endpoint"),
        weight=integer(block, "weight"),
        healthy=boolean(block, "healthy"),
        drain_refs=strings(block, "drainRefs"),
        capacity=capacity,
        probe=probe,
    )


def _condition(raw: object) -> Condition:
    block = obj(raw, "conditions")
    return Condition(
        type=string(block, "type"),
        status=string(block, "status"),
        observed_generation=integer(block, "observedGeneration", 64),
        last_transition_time=time(block, "lastTransitionTime"),
        reason=string(block, "reason"),
        message=string(block, "message"),
    )


def _owner(raw: object) -> OwnerRef:
    block = obj(raw, "ownerReferences")
    return OwnerRef(
        api_version=string(block, "apiVersion"),
        kind=string(block, "kind"),
        name=string(block, "name"),
        uid=string(block, "uid"),
        controller=boolean(block, "controller"),
    )


def read_trafficmap(raw: Mapping[str, Any]) -> TrafficMap:
    meta_block = obj(raw.get("metadata"), "metadata")
    spec = obj(raw.get("spec"), "spec")
    status = obj(raw.get("status"), "status")
    gateway_raw = status.get("gatewayRef")
    gateway = None
    if gateway_raw is not None:
        ref = obj(gateway_raw, "gatewayRef")
        gateway = (
            string(ref, "group"),
            string(ref, "kind"),
            string(ref, "namespace"),
            string(ref, "name"),
        )
    return TrafficMap(
        meta=read_meta(raw),
        owners=tuple(_owner(item) for item in array(meta_block, "ownerReferences")),
        service=string(spec, "service"),
        mode=string(spec, "mode"),
        observed_isvc_generation=integer(spec, "observedISVCGeneration", 64),
        entries=tuple(_entry(item) for item in array(spec, "entries")),
        conditions=tuple(_condition(item) for item in array(status, "conditions")),
        published=boolean(status, "published"),
        observed_generation=integer(status, "observedTrafficMapGeneration", 64),
        gateway=gateway,
    )
