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
(at most 64, 16 kept), and a capacity fallback reason shows only as its code. The rows
themselves are `placement_routes`'s.
"""

from __future__ import annotations

from datetime import datetime

from ome_routing.core.names import dns1123_subdomain_problems
from ome_routing.kubectl.gotext import (
    public_name,
    public_namespace,
    sanitize,
)
from ome_routing.kubectl.objects import Isvc, TrafficMap
from ome_routing.kubectl.placement_routes import route_rows
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
    freshness,
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
    content["entries"] = route_rows(tmap, routing, issues, source, now)
    return content


def _acquisition_order(acquisition: Value) -> Value:
    keys = ("state", "reason", "returned", "admitted", "pages", "complete", "truncated")
    return {key: acquisition[key] for key in keys if key in acquisition}
