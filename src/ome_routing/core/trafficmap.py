"""Build a TrafficMap's entries and conditions from its inputs.

One entry per home, sorted by cluster, with its weight (see `weights`), health,
capacity and the drains that hold it; and the three conditions that describe the
table: `Routable`, `OverrideActive` and `CapacityFallback`. `Published` belongs to
the publisher and is not built here; `conditions.merge_conditions` merges these into
`status.conditions` and keeps `Published` as it is.

Pure: the caller resolves the inputs (placement, policy, windows, annotation) and
writes the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from itertools import pairwise
from typing import Any

from ome_routing.core.allocation import CapacitySource, allocate
from ome_routing.core.capacity import NO_REPORT_YET, Verdict
from ome_routing.core.conditions import (
    CAPACITY_FALLBACK,
    FALSE,
    OVERRIDE_ACTIVE,
    ROUTABLE,
    TRUE,
    Condition,
    FallbackReason,
    OverrideReason,
    RoutableReason,
)
from ome_routing.core.drains import NO_DRAINS, Drain
from ome_routing.core.probes import ProbeState, probe_to_json
from ome_routing.core.quantity import Quantity
from ome_routing.core.weights import AllFailedPolicy, WeightInput, compute_weights

PLACED = "Placed"

# OME's condition messages, word for word; `{}` stands where OME prints a count.
MSG_NOT_PLACED = "InferenceService is not Placed; no homes to route to yet"
MSG_NO_ADDRESSABLE_HOME = "placed, but no admitted home reports an addressable endpoint"
MSG_ALL_HOMES_UNREADY = (
    "{} home(s) addressable but none has ready replicas; all route weights are zero"
)
MSG_TRAFFIC_DRAIN = "manual traffic-drain overrides set all {} route arm(s) to zero"
MSG_NO_ROUTABLE_CAPACITY = (
    "{} home(s) addressable but none has positive routable capacity; all route weights are zero"
)
MSG_ALL_HOMES_PROBE_FAILED_PRESERVED = (
    "{} home(s) have conclusive probe failures; preserving traffic among homes with ready capacity"
)
MSG_ALL_HOMES_PROBE_FAILED = "{} home(s) have conclusive probe failures; all route weights are zero"
MSG_ROUTABLE = "{} home(s) serving"
MSG_OVERRIDES_PENDING = "{} traffic-drain annotation override(s) pending; no matching routable arm"
MSG_OVERRIDES_APPLIED = (
    "{} of {} traffic-drain annotation override(s) active across {} route arm(s); "
    "inspect spec.entries[].drainRefs"
)
MSG_NO_OVERRIDES = "no traffic-drain annotation override is configured"
MSG_CAPACITY_POLLING_DISABLED = "endpoint capacity polling is disabled"
MSG_NO_CAPACITY_TARGETS = "no addressable homes require endpoint capacity"
MSG_ENDPOINT_CAPACITY_AVAILABLE = "endpoint capacity is available for all {} home(s)"
MSG_ENDPOINT_CAPACITY_UNAVAILABLE = (
    "{} of {} home(s) are using control-plane capacity; "
    "inspect spec.entries[].capacity.fallbackReason"
)


class PollingState(StrEnum):
    """Whether a capacity poll applies to the service."""

    ON = "On"
    #: `spec.routing.capacity.disabled: true`.
    DISABLED = "Disabled"
    #: No poll in the chart and none in `spec.routing.capacity`.
    NOT_CONFIGURED = "NotConfigured"


@dataclass(frozen=True, slots=True)
class HomeInput:
    """One home: an admitted placement candidate with an endpoint."""

    cluster: str
    endpoint: str
    admitted: int
    ready: int
    #: From `spec.routing.capacityFactors`; None counts as 1 and is not shown.
    factor: Quantity | None = None
    probe_gated: bool = False
    #: The accepted placement plan asks the home to drain: weight 0, nothing else changes.
    plan_drained: bool = False
    #: The home's window verdict; None while polling is off (or before its first verdict).
    capacity: Verdict | None = None
    #: The home's probe state and the probe's `policyDigest`; None while probing is off
    #: or before the home was probed (or its state restored).
    probe: tuple[ProbeState, str] | None = None


@dataclass(frozen=True, slots=True)
class MapInput:
    """Everything a TrafficMap's table and conditions follow from."""

    #: `status.placement.phase` is `Placed`; otherwise the table is empty.
    placed: bool
    homes: tuple[HomeInput, ...]
    polling: PollingState
    drains: Mapping[str, Drain] = field(default_factory=lambda: NO_DRAINS, hash=False)
    all_failed_policy: AllFailedPolicy | None = None


@dataclass(frozen=True, slots=True)
class EntryCapacity:
    allocated: int
    ready: int
    factor: Quantity | None
    source: CapacitySource
    #: The ceiling; set only while polling is on and the home has one.
    reported: int | None
    #: Why the home has no ceiling; set only while polling is on and it has none.
    fallback_reason: str | None


@dataclass(frozen=True, slots=True)
class Entry:
    cluster: str
    endpoint: str
    weight: int
    healthy: bool
    capacity: EntryCapacity
    drain_refs: tuple[str, ...]
    #: the probe state and its policy's digest, shown as `probe`
    probe: tuple[ProbeState, str] | None = None


@dataclass(frozen=True, slots=True)
class TrafficMapView:
    """The table and its conditions."""

    entries: tuple[Entry, ...]
    conditions: tuple[Condition, ...]
    #: Homes without a ceiling while polling is on: the gauge
    #: `ome_trafficmap_capacity_fallback_homes`.
    fallback_homes: int

    def condition(self, type_: str) -> Condition:
        return next(c for c in self.conditions if c.type == type_)


def build_trafficmap(inp: MapInput) -> TrafficMapView:
    """The entries (sorted by cluster) and the Routable, OverrideActive and CapacityFallback conditions."""
    homes = sorted(inp.homes, key=lambda h: h.cluster) if inp.placed else []
    for previous, home in pairwise(homes):
        if previous.cluster == home.cluster:
            raise ValueError(f"homes must have distinct clusters, got {home.cluster!r} twice")
    polling_on = inp.polling is PollingState.ON
    refs = _drain_refs(inp.drains)
    capacities = [_capacity(h, polling_on) for h in homes]
    weights = compute_weights(
        [
            WeightInput(
                allocated=cap.allocated,
                ready=h.ready,
                factor=h.factor.value if h.factor is not None else Fraction(1),
                probe_gated=h.probe_gated,
                drained=h.cluster in refs,
                plan_drained=h.plan_drained,
            )
            for h, cap in zip(homes, capacities, strict=True)
        ],
        inp.all_failed_policy,
    )
    entries = tuple(
        Entry(
            cluster=h.cluster,
            endpoint=h.endpoint,
            weight=weight,
            healthy=h.ready > 0 and not h.probe_gated,
            capacity=cap,
            drain_refs=refs.get(h.cluster, ()),
            probe=h.probe,
        )
        for h, cap, weight in zip(homes, capacities, weights.weights, strict=True)
    )
    fallback = sum(1 for c in capacities if c.fallback_reason is not None)
    conditions = (
        _routable(inp, homes, capacities, weights.weights, weights.before_drains),
        _override_active(inp.drains, entries),
        _capacity_fallback(inp.polling, len(entries), fallback),
    )
    return TrafficMapView(entries=entries, conditions=conditions, fallback_homes=fallback)


def entry_to_json(entry: Entry) -> dict[str, Any]:
    """An entry as OME stores it.

    `weight`, `healthy` and `capacity` are always written; `allocated` and `ready` are
    left out when 0, `reported` is kept at 0 (a ceiling of 0 is a real report), and an
    empty endpoint, unset factor, missing fallback reason and empty `drainRefs` are
    left out; `probe` is written once the home was probed (or its state restored).
    """
    capacity: dict[str, Any] = {}
    if entry.capacity.allocated:
        capacity["allocated"] = entry.capacity.allocated
    if entry.capacity.ready:
        capacity["ready"] = entry.capacity.ready
    if entry.capacity.factor is not None:
        capacity["factor"] = str(entry.capacity.factor)
    capacity["source"] = str(entry.capacity.source)
    if entry.capacity.reported is not None:
        capacity["reported"] = entry.capacity.reported
    if entry.capacity.fallback_reason is not None:
        capacity["fallbackReason"] = entry.capacity.fallback_reason
    result: dict[str, Any] = {
        "cluster": entry.cluster,
    }
    if entry.endpoint:
        result["endpoint"] = entry.endpoint
    result |= {"weight": entry.weight, "healthy": entry.healthy, "capacity": capacity}
    if entry.probe is not None and entry.probe[0].observed:
        result["probe"] = probe_to_json(*entry.probe)
    if entry.drain_refs:
        result["drainRefs"] = list(entry.drain_refs)
    return result


def entries_to_json(view: TrafficMapView) -> list[dict[str, Any]]:
    """`spec.entries`, sorted by cluster."""
    return [entry_to_json(e) for e in sorted(view.entries, key=lambda e: e.cluster)]


def _drain_refs(drains: Mapping[str, Drain]) -> dict[str, tuple[str, ...]]:
    refs: dict[str, list[str]] = {}
    for drain_id in sorted(drains):
        refs.setdefault(drains[drain_id].cluster, []).append(drain_id)
    return {cluster: tuple(ids) for cluster, ids in refs.items()}


def _capacity(home: HomeInput, polling_on: bool) -> EntryCapacity:
    verdict = home.capacity if polling_on else None
    if polling_on and verdict is None:
        verdict = Verdict(ceiling=None, fallback_reason=NO_REPORT_YET)
    allocation = allocate(home.admitted, verdict.ceiling if verdict is not None else None)
    return EntryCapacity(
        allocated=allocation.allocated,
        ready=home.ready,
        factor=home.factor,
        source=allocation.source,
        reported=allocation.reported,
        fallback_reason=verdict.fallback_reason if verdict is not None else None,
    )


def _routable(
    inp: MapInput,
    homes: Sequence[HomeInput],
    capacities: Sequence[EntryCapacity],
    weights: Sequence[int],
    before_drains: Sequence[int],
) -> Condition:
    """`Routable`, as OME decides it: the first reason that applies, in this order.

    1. `NotPlaced`, then `NoAddressableHome`: the table is empty, and why.
    2. Some weight is positive: `True`, with `AllHomesProbeFailed` when the probe
       gates every home (so `PreserveTraffic` kept the weights), else `Routable`.
    3. Every weight is 0:
       - `TrafficDrain` when drains took away every positive weight;
       - `AllHomesUnready` when no home has a ready replica;
       - `NoRoutableCapacity` when no home has both allocated and ready replicas;
       - `AllHomesProbeFailed` when the probe gates every home;
       - `NoRoutableCapacity` otherwise.

    Each count is the number of entries in the table.
    """
    if not inp.placed:
        return Condition(ROUTABLE, FALSE, RoutableReason.NOT_PLACED, MSG_NOT_PLACED)
    if not homes:
        return Condition(
            ROUTABLE, FALSE, RoutableReason.NO_ADDRESSABLE_HOME, MSG_NO_ADDRESSABLE_HOME
        )
    total = len(homes)
    all_gated = all(h.probe_gated for h in homes)
    if any(w > 0 for w in weights):
        if all_gated:
            return Condition(
                ROUTABLE,
                TRUE,
                RoutableReason.ALL_HOMES_PROBE_FAILED,
                MSG_ALL_HOMES_PROBE_FAILED_PRESERVED.format(total),
            )
        return Condition(ROUTABLE, TRUE, RoutableReason.ROUTABLE, MSG_ROUTABLE.format(total))
    if any(w > 0 for w in before_drains):
        return Condition(
            ROUTABLE, FALSE, RoutableReason.TRAFFIC_DRAIN, MSG_TRAFFIC_DRAIN.format(total)
        )
    if not any(h.ready > 0 for h in homes):
        return Condition(
            ROUTABLE, FALSE, RoutableReason.ALL_HOMES_UNREADY, MSG_ALL_HOMES_UNREADY.format(total)
        )
    routable = [min(h.ready, c.allocated) for h, c in zip(homes, capacities, strict=True)]
    if all_gated and any(r > 0 for r in routable):
        return Condition(
            ROUTABLE,
            FALSE,
            RoutableReason.ALL_HOMES_PROBE_FAILED,
            MSG_ALL_HOMES_PROBE_FAILED.format(total),
        )
    return Condition(
        ROUTABLE,
        FALSE,
        RoutableReason.NO_ROUTABLE_CAPACITY,
        MSG_NO_ROUTABLE_CAPACITY.format(total),
    )


def _override_active(drains: Mapping[str, Drain], entries: Sequence[Entry]) -> Condition:
    """`OverrideActive`: applied overrides are the distinct IDs across `drainRefs`."""
    if not drains:
        return Condition(OVERRIDE_ACTIVE, FALSE, OverrideReason.NO_OVERRIDES, MSG_NO_OVERRIDES)
    applied = {ref for e in entries for ref in e.drain_refs}
    if not applied:
        return Condition(
            OVERRIDE_ACTIVE,
            FALSE,
            OverrideReason.OVERRIDES_PENDING,
            MSG_OVERRIDES_PENDING.format(len(drains)),
        )
    arms = sum(1 for e in entries if e.drain_refs)
    return Condition(
        OVERRIDE_ACTIVE,
        TRUE,
        OverrideReason.OVERRIDES_APPLIED,
        MSG_OVERRIDES_APPLIED.format(len(applied), len(drains), arms),
    )


def _capacity_fallback(polling: PollingState, homes: int, fallback: int) -> Condition:
    """`CapacityFallback`: whether polling applies comes first, then an empty table.

    A poll turned off (`disabled: true`) and a poll set nowhere read the same, as in OME.
    """
    if polling is not PollingState.ON:
        return Condition(
            CAPACITY_FALLBACK,
            FALSE,
            FallbackReason.CAPACITY_POLLING_DISABLED,
            MSG_CAPACITY_POLLING_DISABLED,
        )
    if homes == 0:
        return Condition(
            CAPACITY_FALLBACK, FALSE, FallbackReason.NO_CAPACITY_TARGETS, MSG_NO_CAPACITY_TARGETS
        )
    if fallback:
        return Condition(
            CAPACITY_FALLBACK,
            TRUE,
            FallbackReason.ENDPOINT_CAPACITY_UNAVAILABLE,
            MSG_ENDPOINT_CAPACITY_UNAVAILABLE.format(fallback, homes),
        )
    return Condition(
        CAPACITY_FALLBACK,
        FALSE,
        FallbackReason.ENDPOINT_CAPACITY_AVAILABLE,
        MSG_ENDPOINT_CAPACITY_AVAILABLE.format(homes),
    )
