"""`kubectl ome traffic diff`: a TrafficMap beside its ShadowTrafficMap, home by home.

Not OME's (OME has no shadow policy). Pure: `diff_report` takes the two objects as the
API server returns them and gives the report (its `-o json|yaml` document);
`diff_table` prints it. Per home: the live weight, share and ceiling (the entry's
`capacity.source`, and the ceiling while the home has one) from the TrafficMap's
`spec.entries`, the same from the ShadowTrafficMap's `status.entries`, and the reason
their shares differ (`status.homes[].reason`). Then the shadow settings that were not
evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ome_routing.kubectl.table import render_table

HEADERS = (
    "CLUSTER",
    "LIVE WEIGHT",
    "LIVE SHARE",
    "LIVE CEILING",
    "SHADOW WEIGHT",
    "SHADOW SHARE",
    "SHADOW CEILING",
    "REASON",
)


def _entries(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [e for e in value if isinstance(e, Mapping) and isinstance(e.get("cluster"), str)]


def _weight(entry: Mapping[str, Any] | None) -> int:
    weight = (entry or {}).get("weight")
    return weight if isinstance(weight, int) and not isinstance(weight, bool) else 0


def _share(weight: int, total: int) -> str:
    share = Fraction(weight, total) if total else Fraction(0)
    tenths = round(share * 1000)
    return f"{tenths // 10}.{tenths % 10}%"


def _ceiling(entry: Mapping[str, Any] | None) -> str:
    """`Endpoint 1`, `ControlPlane 4`, `ControlPlane` (no ceiling), or `-` (no entry)."""
    if entry is None:
        return "-"
    capacity = entry.get("capacity")
    capacity = capacity if isinstance(capacity, Mapping) else {}
    source = str(capacity.get("source") or "ControlPlane")
    reported = capacity.get("reported")
    return f"{source} {reported}" if isinstance(reported, int) else source


def diff_report(tmap: Mapping[str, Any], shadow: Mapping[str, Any]) -> dict[str, Any]:
    """The report: one row per home of either table, sorted by cluster."""
    spec = tmap.get("spec")
    live = _entries(spec.get("entries") if isinstance(spec, Mapping) else None)
    status = shadow.get("status")
    status = status if isinstance(status, Mapping) else {}
    candidate = _entries(status.get("entries"))
    reasons = {
        str(h.get("cluster")): str(h.get("reason") or "") for h in _entries(status.get("homes"))
    }
    live_by = {str(e["cluster"]): e for e in live}
    shadow_by = {str(e["cluster"]): e for e in candidate}
    live_total = sum(_weight(e) for e in live)
    shadow_total = sum(_weight(e) for e in candidate)
    homes = []
    for cluster in sorted({*live_by, *shadow_by}):
        live_entry, shadow_entry = live_by.get(cluster), shadow_by.get(cluster)
        homes.append(
            {
                "cluster": cluster,
                "liveWeight": _weight(live_entry),
                "liveShare": _share(_weight(live_entry), live_total),
                "liveCeiling": _ceiling(live_entry),
                "shadowWeight": _weight(shadow_entry),
                "shadowShare": _share(_weight(shadow_entry), shadow_total),
                "shadowCeiling": _ceiling(shadow_entry),
                "reason": reasons.get(cluster, ""),
            }
        )
    metadata = tmap.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    not_evaluated = [
        {"field": str(n.get("field")), "reason": str(n.get("reason"))}
        for n in status.get("notEvaluated") or ()
        if isinstance(n, Mapping)
    ]
    return {
        "trafficMap": f"{metadata.get('namespace')}/{metadata.get('name')}",
        "source": str(status.get("source") or ""),
        "divergentHomes": sum(1 for h in homes if h["liveShare"] != h["shadowShare"]),
        "homes": homes,
        "notEvaluated": not_evaluated,
    }


def diff_table(report: Mapping[str, Any]) -> str:
    """Live beside shadow, then where the shadow came from and what it could not judge."""
    rows = [
        (
            h["cluster"],
            str(h["liveWeight"]),
            h["liveShare"],
            h["liveCeiling"],
            str(h["shadowWeight"]),
            h["shadowShare"],
            h["shadowCeiling"],
            h["reason"],
        )
        for h in report["homes"]
    ]
    text = render_table(HEADERS, rows)
    text += f"\nShadow from {report['source']}: {report['divergentHomes']} home(s) diverge.\n"
    for item in report["notEvaluated"]:
        text += f"{item['field']}: {item['reason']}\n"
    return text
