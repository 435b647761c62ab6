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

from ome_routing.core.capacity import NO_REPORT_YET, CapacitySource, Verdict, allocate
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
from ome_routing.core.quantity import Quantity
from ome_routing.core.weights import AllFailedPolicy, WeightInput, compute_weights

PLACED = "Placed"


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
    #: The home's window verdict; None while polling is off (or before its first verdict).
    capacity: Verdict | None = None


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


def capacity_fallback_homes(inp: MapInput) -> int:
    """How many homes have no ceiling while polling is on (0 when it is off)."""
    if inp.polling is not PollingState.ON or not inp.placed:
        return 0
    return sum(1 for h in inp.homes if h.capacity is None or h.capacity.ceiling is None)


def entry_to_json(entry: Entry) -> dict[str, Any]:
    """An entry as the TrafficMap stores it: zero counts, unset factor and empty lists omitted."""
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
        "endpoint": entry.endpoint,
        "weight": entry.weight,
        "healthy": entry.healthy,
        "capacity": capacity,
    }
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
    """`Routable`, taking the first reason that applies, in this order.

    1. `NotPlaced`, then `NoAddressableHome`: the table is empty, and why.
    2. Some weight is positive: `True`, with `AllHomesProbeFailed` when the probe
       gates every home and `PreserveTraffic` kept the weights, else `Routable`.
    3. Every weight is 0:
       - `AllHomesProbeFailed` when the probe gates every home and its policy does
         not preserve traffic (`Drain`, or none given);
       - `TrafficDrain` when drains took away every positive weight;
       - `AllHomesUnready` when no home has a ready replica;
       - `NoRoutableCapacity` otherwise: no home that the probe leaves open has both
         allocated and ready replicas (a ceiling of 0, or nothing admitted).
    """
    if not inp.placed:
        return Condition(
            ROUTABLE,
            FALSE,
            RoutableReason.NOT_PLACED,
            f"status.placement.phase is not {PLACED}, so the table is empty",
        )
    if not homes:
        return Condition(
            ROUTABLE,
            FALSE,
            RoutableReason.NO_ADDRESSABLE_HOME,
            "placed, but no admitted cluster reports an endpoint, so the table is empty",
        )
    total = len(homes)
    all_gated = all(h.probe_gated for h in homes)
    positive = sum(1 for w in weights if w > 0)
    if positive:
        if all_gated:
            return Condition(
                ROUTABLE,
                TRUE,
                RoutableReason.ALL_HOMES_PROBE_FAILED,
                f"{total} home(s) have conclusive probe failures; "
                "preserving traffic among homes with ready capacity",
            )
        return Condition(
            ROUTABLE,
            TRUE,
            RoutableReason.ROUTABLE,
            f"{positive} of {total} home(s) have a positive weight",
        )
    if all_gated and inp.all_failed_policy is not AllFailedPolicy.PRESERVE_TRAFFIC:
        return Condition(
            ROUTABLE,
            FALSE,
            RoutableReason.ALL_HOMES_PROBE_FAILED,
            f"{total} home(s) have conclusive probe failures; all route weights are zero",
        )
    drained = [h.cluster for h, w in zip(homes, before_drains, strict=True) if w > 0]
    if drained:
        return Condition(
            ROUTABLE,
            FALSE,
            RoutableReason.TRAFFIC_DRAIN,
            f"drains hold every home with a positive weight: {', '.join(drained)}",
        )
    if not any(h.ready > 0 for h in homes):
        return Condition(
            ROUTABLE,
            FALSE,
            RoutableReason.ALL_HOMES_UNREADY,
            f"none of the {total} home(s) has a ready replica",
        )
    return Condition(
        ROUTABLE,
        FALSE,
        RoutableReason.NO_ROUTABLE_CAPACITY,
        f"no home open to traffic has both allocated and ready replicas "
        f"(allocated: {_counts(homes, [c.allocated for c in capacities])})",
    )


def _counts(homes: Sequence[HomeInput], values: Sequence[int]) -> str:
    return ", ".join(f"{h.cluster}={v}" for h, v in zip(homes, values, strict=True))


def _override_active(drains: Mapping[str, Drain], entries: Sequence[Entry]) -> Condition:
    if not drains:
        return Condition(
            OVERRIDE_ACTIVE, FALSE, OverrideReason.NO_OVERRIDES, "the service has no drains"
        )
    held = sorted({ref for e in entries for ref in e.drain_refs})
    if held:
        holding = sum(1 for e in entries if e.drain_refs)
        return Condition(
            OVERRIDE_ACTIVE,
            TRUE,
            OverrideReason.OVERRIDES_APPLIED,
            f"{len(held)} drain(s) hold {holding} home(s): {', '.join(held)}",
        )
    unmatched = sorted({d.cluster for d in drains.values()})
    return Condition(
        OVERRIDE_ACTIVE,
        FALSE,
        OverrideReason.OVERRIDES_PENDING,
        f"{len(drains)} drain(s) name no cluster in the table: {', '.join(unmatched)}",
    )


def _capacity_fallback(polling: PollingState, homes: int, fallback: int) -> Condition:
    """`CapacityFallback`: whether polling applies comes first, then an empty table."""
    if polling is PollingState.DISABLED:
        return Condition(
            CAPACITY_FALLBACK,
            FALSE,
            FallbackReason.CAPACITY_POLLING_DISABLED,
            "capacity polling is disabled by spec.routing.capacity.disabled",
        )
    if polling is PollingState.NOT_CONFIGURED:
        return Condition(
            CAPACITY_FALLBACK,
            FALSE,
            FallbackReason.CAPACITY_POLLING_NOT_CONFIGURED,
            "no capacity poll is set in the chart's routing.capacity "
            "or the service's spec.routing.capacity",
        )
    if homes == 0:
        return Condition(
            CAPACITY_FALLBACK,
            FALSE,
            FallbackReason.NO_CAPACITY_TARGETS,
            "the table has no homes to poll",
        )
    if fallback:
        return Condition(
            CAPACITY_FALLBACK,
            TRUE,
            FallbackReason.ENDPOINT_CAPACITY_UNAVAILABLE,
            f"{fallback} of {homes} home(s) are using control-plane capacity; "
            "inspect spec.entries[].capacity.fallbackReason",
        )
    return Condition(
        CAPACITY_FALLBACK,
        FALSE,
        FallbackReason.ENDPOINT_CAPACITY_AVAILABLE,
        f"endpoint capacity is available for all {homes} home(s)",
    )
