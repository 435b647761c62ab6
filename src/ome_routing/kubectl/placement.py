"""`kubectl ome placement endpoint`: OME's `PlacementEndpointReport` and its tables.

The report is built from what the CLI read (`endpoint_report`): the InferenceService,
which must be readable (else the command fails), and its TrafficMap, whose absence or
unreadability is only a state of the report (`TrafficMap state Unavailable`, reason
`NotFound`, `Forbidden`, `Timeout`, `Cancelled`, `UnsupportedAPI`, `Unreadable`, or
`OwnershipUnbound` for a map that is not the service's own). `-o json|yaml` print the
report; `endpoint_rows` are the FIELD/VALUE rows in OME's order, `-o wide` adding each
route home's capacity, probe and drain rows. No full URL, condition message, probe
message or fallback text is ever reported: origins and codes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ome_routing.kubectl.objects import Unreadable, read_isvc, read_trafficmap
from ome_routing.kubectl.placement_routing import project_routing
from ome_routing.kubectl.placement_status import PlacementInputError, project_status
from ome_routing.kubectl.placement_values import Value, canonical_issues
from ome_routing.kubectl.report import envelope, source
from ome_routing.kubectl.table import Row, render_fields

__all__ = [
    "KIND",
    "PlacementError",
    "acquired",
    "endpoint_report",
    "endpoint_rows",
    "format_endpoint_table",
    "unavailable",
]

KIND = "PlacementEndpointReport"
HINTS: tuple[Row, ...] = (
    ("Hint", "Routing generation does not date placement"),
    ("Hint", "Recorded probes only; no CLI network probe"),
    ("View", "Bounded cells; use -o json for complete identities"),
)
#: The TrafficMap source's `unavailableReason` for each acquisition reason.
_UNAVAILABLE_REASONS = {
    "Forbidden": "Forbidden",
    "NotFound": "NotFound",
    "UnsupportedAPI": "UnsupportedAPI",
    "OwnershipUnbound": "MalformedPayload",
    "MalformedPayload": "MalformedPayload",
}


class PlacementError(Exception):
    """The report cannot be made; the command prints `error: <message>` and exits 1."""


def acquired() -> Value:
    """The acquisition of a TrafficMap the CLI read."""
    return {
        "state": "Observed",
        "returned": 1,
        "admitted": 1,
        "pages": 1,
        "complete": True,
        "truncated": False,
    }


def unavailable(reason: str) -> Value:
    """The acquisition of a TrafficMap the CLI could not read, and why."""
    return {
        "state": "Unavailable",
        "reason": reason,
        "returned": 0,
        "admitted": 0,
        "pages": 0,
        "complete": False,
        "truncated": False,
    }


def endpoint_report(
    isvc_raw: Mapping[str, Any],
    tmap_raw: Mapping[str, Any] | None,
    acquisition: Value,
    now: datetime,
) -> dict[str, Any]:
    """The report of one InferenceService (as read) and its TrafficMap (None: not read)."""
    try:
        isvc = read_isvc(isvc_raw)
    except Unreadable:
        raise PlacementError("InferenceService read unavailable: Unreadable") from None
    try:
        status = project_status(isvc)
    except PlacementInputError as err:
        raise PlacementError(str(err)) from None
    tmap = None
    if tmap_raw is not None:
        try:
            tmap = read_trafficmap(tmap_raw)
        except Unreadable:
            acquisition = unavailable("Unreadable")
    content = project_routing(isvc, tmap, dict(acquisition), status, now)
    status["issues"] = canonical_issues(status["issues"])
    content["issues"] = canonical_issues(content["issues"])
    meta = isvc.meta
    got = content["routing"]["acquisition"]
    if got["state"] in ("Unavailable", ""):
        reason = _UNAVAILABLE_REASONS.get(got.get("reason", ""), "Unreadable")
        tmap_source = source("TrafficMap", meta.namespace, meta.name, "Unavailable", reason)
    else:
        tmap_source = source("TrafficMap", meta.namespace, meta.name, "Observed")
    sources = [source("InferenceService", meta.namespace, meta.name, "Reported"), tmap_source]
    return envelope(KIND, meta.namespace, meta.name, now, sources, content)


# --- the table --------------------------------------------------------------------------


def _preview(value: Mapping[str, Any]) -> str:
    truncated = "true" if value["truncated"] else "false"
    return f"{value['state']} {value['kept']}/{value['total']}; truncated={truncated}"


def _address(value: Mapping[str, Any]) -> str:
    return str(value.get("endpointOrigin") or value["state"])


def _count(value: Mapping[str, Any]) -> str:
    return f"{value['value']} ({value['state']})" if "value" in value else str(value["state"])


def _condition(value: Mapping[str, Any]) -> str:
    return f"{value['status']}: {value['reason']} ({value['source']['freshness']})"


def _bool(value: object) -> str:
    return "true" if value else "false"


def _issues(issues: Sequence[Mapping[str, Any]]) -> list[Row]:
    return [
        ("Issue", f"{issue['group']}: {issue['code']} ({issue['count']})")
        for issue in canonical_issues(issues)
    ]


def summary_rows(status: Mapping[str, Any]) -> list[Row]:
    """The ten rows every placement table starts with, then the status's issues."""
    inputs, placement = status["inputs"], status["placement"]
    rows: list[Row] = [
        ("Mode", f"{inputs['mode']} ({inputs['modeEvidence']})"),
        ("Placement", f"{placement['phase']} (reported)"),
        ("Freshness", str(placement["source"]["freshness"])),
        ("Input source", str(inputs["source"])),
        ("Selectors", str(inputs["requirementsState"])),
        ("Reported cluster", str(placement.get("reportedCluster", ""))),
        ("Endpoint origin", _address(placement["address"])),
        ("Service origin", _address(placement["serviceAddress"])),
        ("Home inspection", _preview(placement["homePreview"])),
        ("Provenance inspect", _preview(placement["provenancePreview"])),
    ]
    return rows + _issues(status["issues"])


def _acquisition_rows(acquisition: Mapping[str, Any]) -> list[Row]:
    return [
        ("TrafficMap state", str(acquisition["state"])),
        ("TrafficMap reason", str(acquisition.get("reason", ""))),
        ("TrafficMap Returned", str(acquisition["returned"])),
        ("TrafficMap Admitted", str(acquisition["admitted"])),
        ("TrafficMap Pages", str(acquisition["pages"])),
        ("TrafficMap Complete", _bool(acquisition["complete"])),
        ("TrafficMap Truncated", _bool(acquisition["truncated"])),
    ]


def _fallback(entry: Mapping[str, Any]) -> str:
    capacity = entry.get("capacity")
    if capacity and capacity.get("fallbackReason"):
        return str(capacity["fallbackReason"])
    return "NotRecorded"


def _drain_summary(drains: Mapping[str, Any]) -> str:
    state = drains["state"]
    if state == "Validated":
        return str(drains["total"])
    if state in ("MalformedPayload", "BudgetExceeded", "Unavailable", "ConflictingDuplicates"):
        return str(state)
    return "NotRecorded" if state in ("", "NotRecorded") else "Unavailable"


def _gate(probe: Mapping[str, Any]) -> str:
    if probe["gatedState"] == "Reported":
        return "True" if probe["gated"] else "False"
    return str(probe["gatedState"])


def _policy(probe: Mapping[str, Any]) -> str:
    state = probe["policyDigestState"]
    if state == "Reported":
        return str(probe.get("policyDigest") or "Unavailable")
    if state in ("NotRecorded", "Unavailable"):
        return str(state)
    return "NotRecorded" if state == "" else "Unavailable"


def _entry_rows(entry: Mapping[str, Any], wide: bool) -> list[Row]:
    probe = entry["probe"]
    evidence = f"drains={_drain_summary(entry['drainPreview'])}; gate={_gate(probe)}"
    rows: list[Row] = [
        ("Route home", str(entry["cluster"])),
        ("Endpoint origin", _address(entry["address"])),
        ("Final weight", f"{entry['weight']}; healthy={_bool(entry['healthy'])}"),
        ("Recorded probe", str(probe["result"])),
        ("Route evidence", f"{evidence}; fallback={_fallback(entry)}"),
        ("Probe policy", _policy(probe)),
    ]
    if not wide:
        return rows
    capacity = entry.get("capacity")
    if capacity is not None:
        rows += [
            ("Capacity provenance", str(capacity["source"])),
            ("Allocated count", _count(capacity["allocated"])),
            ("Ready count", _count(capacity["ready"])),
        ]
    refs = entry["drainRefs"]
    gate = f"{_gate(probe)} (Reported)" if probe["gatedState"] == "Reported" else _gate(probe)
    return [
        *rows,
        ("Probe freshness", str(probe["source"]["freshness"])),
        ("Drain refs", ", ".join(refs) if refs else str(entry["drainPreview"]["state"])),
        ("Probe gate", gate or "NotRecorded"),
        ("Home cap fallback", _fallback(entry)),
    ]


def endpoint_rows(report: Mapping[str, Any], *, wide: bool) -> list[Row]:
    """The FIELD/VALUE rows of a report, in OME's order."""
    content = report["content"]
    routing = content["routing"]
    rows = summary_rows(content["status"]) + _acquisition_rows(routing["acquisition"])
    routable = routing["routable"]
    rows += [
        ("Entry inspection", _preview(routing["entryPreview"])),
        ("Probe inspection", _preview(routing["probePreview"])),
        ("Condition inspect", _preview(content["conditionPreview"])),
        ("Routing freshness", str(routing["source"]["freshness"])),
        ("Traffic override", _condition(routing["overrideActive"])),
        ("Capacity fallback", _condition(routing["capacityFallback"])),
        ("Routable", f"{routable['status']}: {routable['reason']}"),
        (
            "Routable freshness",
            f"{routable['source']['freshness']}: {routable['source'].get('reason', '')}",
        ),
        ("Published", _condition(routing["published"])),
        ("Publisher", str(routing["acknowledgement"])),
        ("Publisher fresh", str(routing["acknowledgementSource"]["freshness"])),
    ]
    entries = content["entries"]
    if not wide and len(entries) > 4:
        rows.append(("Route preview", f"4/{len(entries)}; use -o wide or json"))
        entries = entries[:4]
    for entry in entries:
        rows += _entry_rows(entry, wide)
    return rows + _issues(content["issues"]) + list(HINTS)


def format_endpoint_table(report: Mapping[str, Any], *, wide: bool = False) -> str:
    return render_fields(endpoint_rows(report, wide=wide))
