"""TrafficMap condition types, reasons, and how a new set merges into `status.conditions`.

`merge_conditions` is what lets the controller skip the status write in steady state: it
returns a list equal to the old one when no condition changed, and keeps a condition's
`lastTransitionTime` while its status stays the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ome_routing.core.report import format_rfc3339

ROUTABLE = "Routable"
OVERRIDE_ACTIVE = "OverrideActive"
CAPACITY_FALLBACK = "CapacityFallback"

TRUE = "True"
FALSE = "False"


class RoutableReason(StrEnum):
    ROUTABLE = "Routable"
    ALL_HOMES_PROBE_FAILED = "AllHomesProbeFailed"
    NOT_PLACED = "NotPlaced"
    NO_ADDRESSABLE_HOME = "NoAddressableHome"
    TRAFFIC_DRAIN = "TrafficDrain"
    ALL_HOMES_UNREADY = "AllHomesUnready"
    NO_ROUTABLE_CAPACITY = "NoRoutableCapacity"


class OverrideReason(StrEnum):
    OVERRIDES_APPLIED = "OverridesApplied"
    OVERRIDES_PENDING = "OverridesPending"
    NO_OVERRIDES = "NoOverrides"


class FallbackReason(StrEnum):
    ENDPOINT_CAPACITY_UNAVAILABLE = "EndpointCapacityUnavailable"
    ENDPOINT_CAPACITY_AVAILABLE = "EndpointCapacityAvailable"
    CAPACITY_POLLING_DISABLED = "CapacityPollingDisabled"
    NO_CAPACITY_TARGETS = "NoCapacityTargets"


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition as the table sets it; `merge_conditions` adds the time and generation."""

    type: str
    status: str
    reason: str
    message: str


def merge_conditions(
    old: Sequence[Mapping[str, Any]],
    new: Sequence[Condition],
    now: datetime,
    generation: int,
) -> list[dict[str, Any]]:
    """`status.conditions` after setting `new`; equal to `old` when nothing changed.

    A condition keeps its `lastTransitionTime` while its status stays the same, and
    gets `now` (whole seconds, UTC) when the status changes or the type is new. Every
    condition set here gets `observedGeneration: generation`. Conditions of other
    types (such as the publisher's `Published`) are kept as they are, in place; new
    types are appended in the order given.
    """
    stamp = format_rfc3339(now.replace(microsecond=0))
    incoming = {c.type: c for c in new}
    merged: list[dict[str, Any]] = []
    seen: set[str] = set()
    for existing in old:
        type_ = existing.get("type")
        if not isinstance(type_, str) or type_ not in incoming or type_ in seen:
            merged.append(dict(existing))
            continue
        seen.add(type_)
        merged.append(_merge_one(existing, incoming[type_], stamp, generation))
    for condition in new:
        if condition.type not in seen:
            seen.add(condition.type)
            merged.append(_merge_one(None, condition, stamp, generation))
    return merged


def _merge_one(
    existing: Mapping[str, Any] | None, condition: Condition, stamp: str, generation: int
) -> dict[str, Any]:
    transition = stamp
    if (
        existing is not None
        and existing.get("status") == condition.status
        and isinstance(existing.get("lastTransitionTime"), str)
    ):
        transition = existing["lastTransitionTime"]
    return {
        "type": condition.type,
        "status": condition.status,
        "observedGeneration": generation,
        "lastTransitionTime": transition,
        "reason": condition.reason,
        "message": condition.message,
    }
