"""`content` of OME's `PlacementEndpointReport`: the TrafficMap, read only when it is the
InferenceService's own, as the routing rows show it.

A TrafficMap is bound to its InferenceService when both have the same name and namespace,
its `spec.service` names the service, neither is being deleted, it has at most 64 owner
references and exactly one controller reference, to an `ome.io` InferenceService of the
same name and UID. Otherwise acquisition reads `Unavailable / OwnershipUnbound` and none
of its contents are reported.

Entries are validated as a whole: one malformed entry (`MalformedPayload`) or two
differing entries for one cluster (`ConflictingDuplicates`) leaves `entries` empty.
Recorded probes dated in the future, or with a policy digest that is not
`sha256:<64 hex>`, read `Invalid` and are counted as issues; drain IDs are validated
(at most 64, 16 kept), and a capacity fallback reason shows only as its code.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ome_routing.core.names import dns1123_subdomain_problems
from ome_routing.core.report import format_rfc3339
from ome_routing.kubectl.gotext import (
    public_name,
    public_namespace,
    sanitize,
)
from ome_routing.kubectl.gourl import address
from ome_routing.kubectl.objects import Entry, Isvc, Probe, TrafficMap
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
from ome_routing.kubectl.placement_status import mode_value
from ome_routing.kubectl.placement_values import (
    CAPACITY_FALLBACK,
    OVERRIDE_ACTIVE,
    PUBLISHED,
    ROUTABLE,
    TRAFFICMAP_RULES,
    Value,
    add_issue,
    condition_value,
    count,
    freshness,
    pointer_count,
    preview,
    project_conditions,
    qualified_name,
    reported,
)

__all__ = ["bound_map", "project_routing"]

_PUBLISHER_FAILURES = frozenset(
    (
        "InvalidOwner",
        "InvalidOptions",
        "InvalidPlan",
        "LegacyLifecycleActive",
        "ClaimRejected",
        "DrainFailed",
        "ApplyFailed",
        "UnpublishFailed",
        "PublisherChanged",
    )
)
_QUALIFIED_KIND_LIMIT = 64


def bound_map(isvc: Isvc, tmap: TrafficMap) -> bool:
    """Whether the TrafficMap belongs to the InferenceService (OME's ownership binding)."""
    meta, owner = tmap.meta, isvc.meta
    if (
        meta.name != owner.name
        or meta.namespace != owner.namespace
        or tmap.service != owner.name
        or meta.generation < 0
        or meta.deleting
        or owner.deleting
        or len(tmap.owners) > 64
    ):
        return False
    controllers = 0
    matched = False
    for ref in tmap.owners:
        if not ref.controller:
            continue
        controllers += 1
        if len(ref.api_version) > 256:
            return False
        group, slash, version = ref.api_version.rpartition("/")
        if (
            slash
            and group == "ome.io"
            and version
            and ref.api_version.count("/") == 1
            and ref.kind == "InferenceService"
            and ref.name == owner.name
            and ref.uid == owner.uid
        ):
            matched = True
    return controllers == 1 and matched


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


def _acknowledgement(routing: Value, tmap: TrafficMap) -> None:
    condition = routing["published"]
    observed = tmap.observed_generation
    routing["acknowledgementSource"] = freshness(observed, tmap.meta.generation)
    if condition["reason"] == "NotRecorded" and observed == 0 and not tmap.published:
        routing["acknowledgement"] = "NoAcknowledgement"
        routing["acknowledgementSource"]["reason"] = "NoAcknowledgement"
        return
    recorded = condition["reason"] != "NotRecorded"
    failure = condition["reason"] in _PUBLISHER_FAILURES and condition["status"] == "False"
    invalid = {
        "evidence": "Reported",
        "freshness": "Invalid",
        "reason": "ConflictingAcknowledgement",
    }
    if (
        observed < 0
        or observed > tmap.meta.generation
        or condition["source"]["freshness"] == "Invalid"
        or (recorded and tmap.published and condition["status"] != "True")
        or (recorded and not _valid_publisher_shape(condition))
    ):
        routing["acknowledgement"] = "Invalid"
        routing["acknowledgementSource"] = {**routing["acknowledgementSource"], **invalid}
        return
    if recorded:
        supplied = 0
        for raw in tmap.conditions:
            if raw.type == PUBLISHED:
                supplied = raw.observed_generation
        if observed and supplied and observed != supplied and (not failure or observed > supplied):
            routing["acknowledgement"] = "Invalid"
            routing["acknowledgementSource"] = {**routing["acknowledgementSource"], **invalid}
            return
        source = dict(condition["source"])
        if observed == 0 and not failure:
            source.update(freshness="Unverifiable", reason="NoObservationGeneration")
        routing["acknowledgementSource"] = source
        routing["acknowledgement"] = {"True": "ReportedTrue", "False": "ReportedFalse"}.get(
            condition["status"], "Unknown"
        )
        return
    routing["acknowledgement"] = "ReportedTrue" if tmap.published else "Unknown"


def _valid_publisher_shape(condition: Value) -> bool:
    reason, status = condition["reason"], condition["status"]
    if reason == "Published":
        return bool(status == "True")
    if reason in ("Withdrawn", "Unpublished"):
        return bool(status == "False")
    return reason in _PUBLISHER_FAILURES and status == "False"


def _gateway(tmap: TrafficMap, issues: list[Value]) -> Value | None:
    if tmap.gateway is None:
        return None
    group, kind, namespace, name = tmap.gateway
    namespace = namespace or tmap.meta.namespace
    if (
        len(group) <= 253
        and sanitize(group, 253) == group
        and (group == "" or not dns1123_subdomain_problems(group))
        and len(kind) <= _QUALIFIED_KIND_LIMIT
        and sanitize(kind, 64) == kind
        and qualified_name(kind)
        and public_name(name)
        and public_namespace(namespace)
    ):
        out: Value = {}
        if group:
            out["group"] = group
        out.update(kind=kind, namespace=namespace, name=name, state="ReportedReferenceNotResolved")
        return out
    add_issue(issues, "Gateway", "MalformedReference")
    return None


def _empty_routing(acquisition: Value) -> Value:
    return {
        "acquisition": acquisition,
        "mode": "NotRecorded",
        "source": {
            "evidence": "Unavailable",
            "freshness": "Unavailable",
            **({"reason": acquisition["reason"]} if acquisition.get("reason") else {}),
        },
        "entryPreview": preview("NotRecorded"),
        "probePreview": preview("NotRecorded"),
        "routable": condition_value([], ROUTABLE),
        "overrideActive": condition_value([], OVERRIDE_ACTIVE),
        "capacityFallback": condition_value([], CAPACITY_FALLBACK),
        "acknowledgement": "NoAcknowledgement",
        "acknowledgementSource": reported(),
        "published": condition_value([], PUBLISHED),
    }


def project_routing(
    isvc: Isvc, tmap: TrafficMap | None, acquisition: Value, status: Value, now: datetime
) -> Value:
    """`PlacementEndpointContent` from the InferenceService's status and its TrafficMap."""
    routing = _empty_routing(acquisition)
    content: Value = {
        "status": status,
        "routing": routing,
        "entries": [],
        "conditions": [],
        "conditionPreview": preview("NotRecorded"),
        "issues": [],
    }
    if tmap is None:
        return content
    if not bound_map(isvc, tmap):
        acquisition.update(
            state="Unavailable", reason="OwnershipUnbound", admitted=0, complete=False
        )
        routing["acquisition"] = _acquisition_order(acquisition)
        routing["source"]["reason"] = "OwnershipUnbound"
        return content
    issues: list[Value] = content["issues"]
    routing["mode"] = mode_value(tmap.mode)
    source = freshness(tmap.observed_isvc_generation, isvc.meta.generation)
    source["evidence"] = "Observed"
    routing["source"] = source
    conditions, condition_preview = project_conditions(
        tmap.conditions, tmap.meta.generation, now, TRAFFICMAP_RULES
    )
    content["conditions"], content["conditionPreview"] = conditions, condition_preview
    if condition_preview["state"] != "Validated":
        add_issue(issues, "TrafficMapConditions", condition_preview["state"])
    for key, kind in (
        ("routable", ROUTABLE),
        ("published", PUBLISHED),
        ("overrideActive", OVERRIDE_ACTIVE),
        ("capacityFallback", CAPACITY_FALLBACK),
    ):
        routing[key] = condition_value(conditions, kind)
    _acknowledgement(routing, tmap)
    gateway = _gateway(tmap, issues)
    if gateway is not None:
        routing["gateway"] = gateway
    content["entries"] = _entries(tmap, routing, issues, source, now)
    return content


def _acquisition_order(acquisition: Value) -> Value:
    keys = ("state", "reason", "returned", "admitted", "pages", "complete", "truncated")
    return {key: acquisition[key] for key in keys if key in acquisition}


def _entries(
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
