"""The closed values of OME's placement reports: evidence, counts, previews, conditions.

Every value a placement report carries is one of a fixed set (`Current`, `Stale`,
`NotRecorded`, `OtherReportedReason`, ...), never text copied from an object. The
builders here return plain dicts with the keys in OME's order, ready for JSON.

`project_conditions` reads a TrafficMap's conditions as OME does: only the four
routing conditions are kept, each with its reason if OME lists it (else
`OtherReportedReason`); a condition that Kubernetes' rules refuse, that is dated in
the future, that is too large or that appears twice with different content becomes
`Unknown` with reason `MalformedCondition` / `ConflictingDuplicates`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ome_routing.core.names import dns1123_subdomain_problems
from ome_routing.kubectl.objects import Condition

Value = dict[str, Any]

ROUTABLE = "Routable"
PUBLISHED = "Published"
OVERRIDE_ACTIVE = "OverrideActive"
CAPACITY_FALLBACK = "CapacityFallback"

#: The reasons OME shows for each TrafficMap condition; any other is OtherReportedReason.
REASONS: dict[str, frozenset[str]] = {
    ROUTABLE: frozenset(
        (
            "Routable",
            "NotPlaced",
            "NoAddressableHome",
            "AllHomesUnready",
            "NoRoutableCapacity",
            "AllHomesProbeFailed",
            "TrafficDrain",
        )
    ),
    PUBLISHED: frozenset(
        (
            "Published",
            "Withdrawn",
            "InvalidOwner",
            "InvalidOptions",
            "InvalidPlan",
            "LegacyLifecycleActive",
            "ClaimRejected",
            "DrainFailed",
            "ApplyFailed",
            "UnpublishFailed",
            "PublisherChanged",
            "Unpublished",
        )
    ),
    OVERRIDE_ACTIVE: frozenset(("OverridesApplied", "OverridesPending", "NoOverrides")),
    CAPACITY_FALLBACK: frozenset(
        (
            "CapacityPollingDisabled",
            "NoCapacityTargets",
            "EndpointCapacityAvailable",
            "EndpointCapacityUnavailable",
        )
    ),
}
#: The rules in the order OME applies them.
TRAFFICMAP_RULES: tuple[str, ...] = (ROUTABLE, PUBLISHED, OVERRIDE_ACTIVE, CAPACITY_FALLBACK)

_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def reported() -> Value:
    return {
        "evidence": "Reported",
        "freshness": "Unverifiable",
        "reason": "NoObservationGeneration",
    }


def freshness(observed: int, current: int) -> Value:
    """Whether a record made for generation `observed` describes generation `current`."""
    if observed < 0 or current < 0 or observed > current:
        return {"evidence": "Reported", "freshness": "Invalid", "reason": "InvalidGeneration"}
    if observed == 0 or current == 0:
        return {
            "evidence": "Reported",
            "freshness": "Unverifiable",
            "reason": "NoObservationGeneration",
        }
    if observed < current:
        return {"evidence": "Reported", "freshness": "Stale", "reason": "StaleGeneration"}
    return {"evidence": "Reported", "freshness": "Current"}


def count(value: int, applicable: bool) -> Value:
    """A count that is 0 when absent: 0 reads `Unknown`, not a reported zero."""
    if not applicable:
        return {"state": "NotApplicable"}
    if value < 0:
        return {"state": "Invalid"}
    if value == 0:
        return {"state": "Unknown"}
    return {"value": value, "state": "Reported"}


def pointer_count(value: int | None) -> Value:
    """A count that may be absent: `UnknownOrDefaulted` then."""
    if value is None:
        return {"state": "UnknownOrDefaulted"}
    if value < 0:
        return {"state": "Invalid"}
    return {"value": value, "state": "Declared"}


def preview(state: str, total: int = 0, kept: int = 0, truncated: bool = False) -> Value:
    return {"state": state, "total": total, "kept": kept, "truncated": truncated}


def add_issue(issues: list[Value], group: str, code: str) -> None:
    for issue in issues:
        if issue["group"] == group and issue["code"] == code:
            issue["count"] += 1
            return
    issues.append({"group": group, "code": code, "count": 1})


def canonical_issues(issues: Iterable[Mapping[str, Any]]) -> list[Value]:
    return sorted(
        (dict(issue) for issue in issues),
        key=lambda issue: (issue["group"], issue["code"], issue["count"]),
    )


def missing_condition(kind: str) -> Value:
    return {"type": kind, "status": "Unknown", "reason": "NotRecorded", "source": reported()}


def condition_value(conditions: Sequence[Value], kind: str) -> Value:
    for condition in conditions:
        if condition["type"] == kind:
            return condition
    return missing_condition(kind)


def _invalid_condition(kind: str, reason: str) -> Value:
    source = {"evidence": "Unavailable", "freshness": "Invalid", "reason": reason}
    return {"type": kind, "status": "Unknown", "reason": reason, "source": source}


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def qualified_name(value: str) -> bool:
    parts = value.split("/")
    if len(parts) > 2:
        return False
    name = parts[-1]
    if len(parts) == 2 and (not parts[0] or dns1123_subdomain_problems(parts[0])):
        return False
    return 0 < _size(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def condition_valid(condition: Condition) -> bool:
    """Kubernetes' `ValidateCondition`."""
    reason = condition.reason
    return (
        qualified_name(condition.type)
        and condition.status in ("True", "False", "Unknown")
        and condition.observed_generation >= 0
        and condition.last_transition_time is not None
        and reason != ""
        and _REASON.fullmatch(reason) is not None
        and _size(reason) <= 1024
        and _size(condition.message) <= 32768
    )


def project_conditions(
    raw: Sequence[Condition], generation: int, now: datetime, rules: Sequence[str]
) -> tuple[list[Value], Value]:
    """The conditions of `rules`' types, sorted by type, and how the list was read."""
    if len(raw) > 64:
        out = sorted((_invalid_condition(kind, "BudgetExceeded") for kind in rules), key=_type)
        return out, preview("BudgetExceeded", total=len(raw))
    state = "Validated"
    seen: dict[str, Condition] = {}
    invalid: dict[str, str] = {}
    for condition in raw:
        within = _size(condition.type) <= 253
        if within:
            prior = seen.get(condition.type)
            if prior is not None and prior != condition:
                _record(invalid, condition.type, "ConflictingDuplicates")
            seen[condition.type] = condition
        if not within or _size(condition.reason) > 1024 or _size(condition.message) > 4096:
            state = "MalformedPayload"
            if within:
                _record(invalid, condition.type, "MalformedCondition")
            continue
        moment = condition.last_transition_time
        if not condition_valid(condition) or (moment is not None and moment > now):
            _record(invalid, condition.type, "MalformedCondition")
    projected: list[Value] = []
    for kind in rules:
        if kind in invalid:
            projected.append(_invalid_condition(kind, invalid[kind]))
            continue
        found = seen.get(kind)
        if found is not None:
            reason = found.reason if found.reason in REASONS[kind] else "OtherReportedReason"
            projected.append(
                {
                    "type": kind,
                    "status": found.status,
                    "reason": reason,
                    "source": freshness(found.observed_generation, generation),
                }
            )
    projected.sort(key=_type)
    if invalid:
        state = "MalformedPayload"
    return projected, preview(state, total=len(raw), kept=len(projected))


def _type(condition: Value) -> str:
    return str(condition["type"])


def _record(invalid: dict[str, str], kind: str, issue: str) -> None:
    if invalid.get(kind) == "ConflictingDuplicates" and issue != "ConflictingDuplicates":
        return
    invalid[kind] = issue
