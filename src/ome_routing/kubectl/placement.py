"""`kubectl ome placement endpoint`: the routing table of one TrafficMap, as a report.

`endpoint_report` turns the TrafficMap the API server returned into the report that
`-o json` and `-o yaml` print whole; `format_endpoint_table` prints it as FIELD/VALUE
rows, `-o wide` adding each home's capacity rows. Only the TrafficMap is read: the
report shows what the controller recorded, not a probe of the endpoints.

A home's `capacity.fallbackReason` appears only as its code (`kubectl.fallback`), in
every output, as OME's CLI does: the raw text can hold a reporter's words. A reason that
cannot be classified is counted in the report's issues (`CapacityFallbackReasons:
MalformedPayload (n)`).

A home's recorded probe shows as OME's CLI shows it: `Recorded probe` (the result, or
`NotRecorded` / `Invalid`), the gate in `Route evidence`, and `Probe policy` (the
digest); `-o wide` adds `Probe gate`, `Probe freshness` (`lastProbeTime` and its age),
`Probe failures` and `Probe message`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from ome_routing.core.conditions import CAPACITY_FALLBACK, OVERRIDE_ACTIVE, ROUTABLE
from ome_routing.core.report import format_rfc3339
from ome_routing.kubectl.fallback import ISSUE_GROUP, FallbackCode, fallback_code
from ome_routing.kubectl.table import Row, render_fields

API_VERSION = "cli.ome.io/v1alpha1"
REPORT_KIND = "PlacementEndpointReport"
PUBLISHED = "Published"
#: The condition rows, in the order the table shows them.
CONDITION_ROWS: tuple[tuple[str, str], ...] = (
    ("Routable", ROUTABLE),
    ("Traffic override", OVERRIDE_ACTIVE),
    ("Capacity fallback", CAPACITY_FALLBACK),
    ("Published", PUBLISHED),
)
HINTS: tuple[str, ...] = (
    "Routing generation does not date placement",
    "Recorded probes only; no CLI network probe",
)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def endpoint_origin(url: object) -> str:
    """Scheme, host and port of an endpoint; `NotRecorded` or `InvalidEndpoint` otherwise."""
    if not isinstance(url, str) or not url:
        return "NotRecorded"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "InvalidEndpoint"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "InvalidEndpoint"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def condition_freshness(condition: Mapping[str, Any], generation: int | None) -> str:
    """Whether the controller wrote the condition for the TrafficMap's current generation."""
    observed = _int(condition.get("observedGeneration"))
    if observed is None or generation is None:
        return "Unverifiable"
    if observed == generation:
        return "Current"
    if 0 < observed < generation:
        return "Stale"
    return "Invalid"


def _conditions(status: Mapping[str, Any], generation: int | None) -> list[dict[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for item in status.get("conditions") or []:
        if isinstance(item, Mapping) and isinstance(item.get("type"), str):
            found.setdefault(item["type"], item)
    result: list[dict[str, Any]] = []
    for _, type_ in CONDITION_ROWS:
        condition = found.get(type_)
        if condition is None:
            result.append(
                {
                    "type": type_,
                    "status": "Unknown",
                    "reason": "NotRecorded",
                    "freshness": "Unverifiable",
                }
            )
            continue
        entry = {
            key: condition[key]
            for key in (
                "type",
                "status",
                "reason",
                "message",
                "observedGeneration",
                "lastTransitionTime",
            )
            if key in condition
        }
        entry["freshness"] = condition_freshness(condition, generation)
        result.append(entry)
    return result


PROBE_RESULTS = ("Passing", "Failing", "Unknown")


def recorded_probe(probe: object) -> str:
    """The entry's last probe result; `NotRecorded` without a probe block."""
    if not isinstance(probe, Mapping):
        return "NotRecorded"
    result = probe.get("result")
    if result is None:
        return "NotRecorded"
    return result if result in PROBE_RESULTS else "Invalid"


def probe_gate(probe: object) -> str:
    """Whether the probe gates the home, as recorded (`gated` is written only while true)."""
    if not isinstance(probe, Mapping):
        return "NotRecorded"
    gated = probe.get("gated", False)
    if not isinstance(gated, bool):
        return "Invalid"
    return "True" if gated else "False"


def probe_freshness(probe: object, now: datetime) -> str:
    """When the last probe finished, and how long ago; `NotRecorded` without one."""
    stamp = _mapping(probe).get("lastProbeTime")
    if not isinstance(stamp, str):
        return "NotRecorded"
    try:
        finished = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        age = int((now - finished).total_seconds())
    except (ValueError, TypeError):
        return "Invalid"
    return f"{stamp} ({age}s ago)" if age >= 0 else f"{stamp} (in the future)"


def _home(entry: Mapping[str, Any]) -> dict[str, Any]:
    capacity = dict(_mapping(entry.get("capacity")))
    capacity["fallbackReason"] = str(fallback_code(capacity.get("fallbackReason")))
    refs = [r for r in entry.get("drainRefs") or [] if isinstance(r, str)]
    home: dict[str, Any] = {
        "cluster": entry.get("cluster"),
        "endpoint": entry.get("endpoint"),
        "endpointOrigin": endpoint_origin(entry.get("endpoint")),
        "weight": entry.get("weight"),
        "healthy": entry.get("healthy"),
        "drainRefs": refs,
        "capacity": capacity,
    }
    probe = entry.get("probe")
    if isinstance(probe, Mapping):
        home["probe"] = dict(probe)
    return home


def _issues(homes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The report's issues: how many homes have a fallback reason that is malformed."""
    malformed = sum(
        1
        for home in homes
        if _mapping(home.get("capacity")).get("fallbackReason") == FallbackCode.MALFORMED_PAYLOAD
    )
    if not malformed:
        return []
    return [{"group": ISSUE_GROUP, "code": str(FallbackCode.MALFORMED_PAYLOAD), "count": malformed}]


def endpoint_report(tmap: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The report of one TrafficMap: its identity, its conditions and one item per home."""
    meta = _mapping(tmap.get("metadata"))
    spec = _mapping(tmap.get("spec"))
    status = _mapping(tmap.get("status"))
    generation = _int(meta.get("generation"))
    entries = [e for e in spec.get("entries") or [] if isinstance(e, Mapping)]
    homes = sorted((_home(e) for e in entries), key=lambda h: str(h["cluster"]))
    return {
        "apiVersion": API_VERSION,
        "kind": REPORT_KIND,
        "collectedAt": format_rfc3339(now),
        "trafficMap": {
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "generation": generation,
            "service": spec.get("service"),
            "mode": spec.get("mode"),
            "observedISVCGeneration": spec.get("observedISVCGeneration"),
        },
        "conditions": _conditions(status, generation),
        "homes": homes,
        "issues": _issues(homes),
    }


def _show(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _count(value: object) -> str:
    """A replica count as recorded; the TrafficMap leaves out zeros, so absent means 0."""
    count = _int(value)
    return f"{count} (Reported)" if count else "Unknown"


def _condition_value(condition: Mapping[str, Any]) -> str:
    return f"{condition.get('status')}: {condition.get('reason')} ({condition.get('freshness')})"


def endpoint_rows(report: Mapping[str, Any], *, wide: bool) -> list[Row]:
    """The table's rows: the map, its conditions, one block per home, then the hints."""
    now = _collected(report)
    tmap = _mapping(report.get("trafficMap"))
    rows: list[Row] = [
        ("TrafficMap", f"{tmap.get('namespace')}/{tmap.get('name')}"),
        ("Mode", _show(tmap.get("mode"))),
        ("Generation", _show(tmap.get("generation"))),
    ]
    conditions: Sequence[Mapping[str, Any]] = report.get("conditions") or []
    by_type = {c.get("type"): c for c in conditions}
    for label, type_ in CONDITION_ROWS:
        condition = by_type.get(type_)
        if condition is not None:
            rows.append((label, _condition_value(condition)))
    homes: Sequence[Mapping[str, Any]] = report.get("homes") or []
    rows.append(("Route homes", str(len(homes))))
    for home in homes:
        capacity = _mapping(home.get("capacity"))
        refs: Sequence[str] = home.get("drainRefs") or []
        code = _show(capacity.get("fallbackReason"))
        probe = home.get("probe")
        gate = probe_gate(probe)
        digest = _mapping(probe).get("policyDigest")
        rows += [
            ("Route home", _show(home.get("cluster"))),
            ("Endpoint origin", _show(home.get("endpointOrigin"))),
            ("Final weight", f"{_show(home.get('weight'))}; healthy={_show(home.get('healthy'))}"),
            ("Recorded probe", recorded_probe(probe)),
            ("Route evidence", f"drains={len(refs)}; gate={gate}; fallback={code}"),
            ("Probe policy", digest if isinstance(digest, str) and digest else "NotRecorded"),
        ]
        if wide:
            rows += [
                (
                    "Capacity provenance",
                    _show(capacity.get("source") or "UnknownOrDefaultedControlPlane"),
                ),
                ("Allocated count", _count(capacity.get("allocated"))),
                ("Ready count", _count(capacity.get("ready"))),
                (
                    "Reported capacity",
                    _show(capacity.get("reported") if "reported" in capacity else "NotRecorded"),
                ),
                ("Capacity factor", _show(capacity.get("factor"))),
                ("Probe freshness", probe_freshness(probe, now)),
                ("Drain refs", ", ".join(refs) if refs else "Validated"),
                ("Probe gate", f"{gate} (Reported)" if gate in ("True", "False") else gate),
                (
                    "Probe failures",
                    _show(_mapping(probe).get("consecutiveFailures", 0))
                    if isinstance(probe, Mapping)
                    else "NotRecorded",
                ),
                ("Probe message", _show(_mapping(probe).get("message"))),
                ("Home cap fallback", code),
            ]
    issues: Sequence[Mapping[str, Any]] = report.get("issues") or []
    rows += [
        ("Issue", f"{issue.get('group')}: {issue.get('code')} ({issue.get('count')})")
        for issue in issues
    ]
    rows += [("Hint", hint) for hint in HINTS]
    return rows


def _collected(report: Mapping[str, Any]) -> datetime:
    """When the report was collected: the moment probe ages are counted from."""
    stamp = report.get("collectedAt")
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


def format_endpoint_table(report: Mapping[str, Any], *, wide: bool = False) -> str:
    return render_fields(endpoint_rows(report, wide=wide))
