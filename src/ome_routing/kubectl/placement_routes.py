"""The rows of `routing.entries` in OME's `PlacementEndpointReport`: one per cluster.

A bound TrafficMap's entries (`placement_routing`) are validated as a whole: more than
256 is `BudgetExceeded`, one malformed entry `MalformedPayload`, two differing entries
for one cluster `ConflictingDuplicates`, and each leaves the rows empty. Identical
duplicates are merged (their drains, probes and fallback reasons), at most 64 rows are
kept, by cluster name. A row shows the entry's weight, address, drains, capacity (a
fallback reason only as its code) and recorded probe (`Invalid` when dated in the future
or with a malformed digest); what it cannot show is counted in the report's issues.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ome_routing.core.report import format_rfc3339
from ome_routing.kubectl.gotext import public_name
from ome_routing.kubectl.gourl import address
from ome_routing.kubectl.objects import Entry, Probe, TrafficMap
from ome_routing.kubectl.placement_evidence import (
    Drains,
    ProbeEvidence,
    drain_evidence,
    fallback_evidence,
    merge_drains,
    merge_fallback,
    merge_probe,
    probe_evidence,
)
from ome_routing.kubectl.placement_values import (
    Value,
    add_issue,
    count,
    pointer_count,
    preview,
    reported,
)

__all__ = ["route_rows"]


def _valid_entry(entry: Entry) -> bool:
    if not public_name(entry.cluster) or not 0 <= entry.weight <= 1_000_000:
        return False
    if entry.endpoint is not None and address(entry.endpoint)["state"] != "Present":
        return False
    cap = entry.capacity
    if cap is not None:
        if cap.allocated < 0 or cap.ready < 0 or (cap.reported is not None and cap.reported < 0):
            return False
        if cap.source not in ("", "ControlPlane", "Endpoint"):
            return False
        if cap.factor is not None and (len(str(cap.factor)) > 256 or cap.factor.value <= 0):
            return False
    probe = entry.probe
    if probe is not None:
        if probe.result not in ("", "Passing", "Failing", "Unknown"):
            return False
        if (
            probe.consecutive_failures < 0
            or len(probe.message.encode("utf-8", "surrogatepass")) > 4096
        ):
            return False
    return True


def _unavailable_probe(reason: str) -> Value:
    return {
        "result": "Invalid",
        "policyDigestState": "Unavailable",
        "gated": False,
        "gatedState": "Unavailable",
        "consecutiveFailures": {"state": "Unknown"},
        "source": {"evidence": "Unavailable", "freshness": "Invalid", "reason": reason},
    }


def route_rows(
    tmap: TrafficMap, routing: Value, issues: list[Value], source: Value, now: datetime
) -> list[Value]:
    total = len(tmap.entries)
    routing["entryPreview"]["total"] = total
    routing["probePreview"] = preview("Unavailable", total=total)
    if total > 256:
        routing["entryPreview"]["state"] = "BudgetExceeded"
        return []
    seen: dict[str, tuple[Entry, Drains, ProbeEvidence, tuple[str, str]]] = {}
    for entry in tmap.entries:
        if not _valid_entry(entry):
            routing["entryPreview"]["state"] = "MalformedPayload"
            return []
        fallback = fallback_evidence(entry.capacity.fallback_reason) if entry.capacity else ("", "")
        evidence = (
            entry,
            drain_evidence(entry.drain_refs),
            probe_evidence(entry.probe, now),
            fallback,
        )
        prior = seen.get(entry.cluster)
        if prior is not None:
            if prior[0].base() != entry.base():
                routing["entryPreview"]["state"] = "ConflictingDuplicates"
                return []
            seen[entry.cluster] = (
                prior[0],
                merge_drains(prior[1], evidence[1]),
                merge_probe(prior[2], evidence[2]),
                merge_fallback(prior[3], evidence[3]),
            )
            continue
        seen[entry.cluster] = evidence
    names = sorted(seen)
    kept = min(len(names), 64)
    routing["entryPreview"] = preview("Validated", len(names), kept, len(names) > 64)
    routing["probePreview"] = preview("Validated", len(names), kept, len(names) > 64)
    out: list[Value] = []
    for name in names[:64]:
        entry, drains, probe, fallback = seen[name]
        out.append(_route(entry, drains, probe, fallback, source, routing, issues))
    return out


def _route(
    entry: Entry,
    drains: Drains,
    probe: ProbeEvidence,
    fallback: tuple[str, str],
    source: Value,
    routing: Value,
    issues: list[Value],
) -> Value:
    row: Value = {
        "cluster": entry.cluster,
        "address": address(entry.endpoint),
        "weight": entry.weight,
        "healthy": entry.healthy,
        "drainRefs": list(drains.refs),
        "drainPreview": drains.preview,
    }
    if drains.preview["state"] != "Validated":
        add_issue(issues, "DrainRefs", drains.preview["state"])
    cap = entry.capacity
    if cap is not None:
        if fallback[1]:
            add_issue(issues, "CapacityFallbackReasons", fallback[1])
        capacity: Value = {"allocated": count(cap.allocated, True), "ready": count(cap.ready, True)}
        if cap.factor is not None:
            capacity["factor"] = str(cap.factor)
        capacity["factorState"] = (
            "Reported" if cap.factor is not None else "UnknownOrDefaultedIdentity"
        )
        capacity["source"] = cap.source or "UnknownOrDefaultedControlPlane"
        reported_count = pointer_count(cap.reported)
        if cap.reported is not None:
            reported_count["state"] = "Reported"
        capacity["reported"] = reported_count
        capacity["fallbackReason"] = fallback[0]
        row["capacity"] = capacity
    row["probe"] = _route_probe(entry.probe, probe, routing, issues)
    row["source"] = dict(source)
    return row


def _route_probe(
    raw: Probe | None, probe: ProbeEvidence, routing: Value, issues: list[Value]
) -> Value:
    out: Value = {
        "result": "NotRecorded",
        "policyDigestState": "NotRecorded",
        "gated": False,
        "gatedState": "NotRecorded",
        "consecutiveFailures": {"state": "Unknown"},
        "source": reported(),
    }
    if raw is None:
        return out
    if probe.issue:
        add_issue(issues, "RecordedProbes", probe.issue)
        routing["probePreview"]["state"] = "Unavailable"
        return _unavailable_probe(probe.issue)
    result: Value = {"result": raw.result or "Unknown"}
    if probe.digest:
        result["policyDigest"] = probe.digest
    result.update(
        policyDigestState=probe.digest_state, gated=probe.gated, gatedState=probe.gated_state
    )
    if raw.last_probe_time is not None:
        result["lastAttemptTime"] = format_rfc3339(raw.last_probe_time.astimezone(UTC))
    result["consecutiveFailures"] = count(raw.consecutive_failures, True)
    result["source"] = reported()
    return result
