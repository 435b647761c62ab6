"""`kubectl ome traffic history`: a TrafficMap's journal of weight changes, in order.

The journal is the `events.k8s.io/v1` Events the routing controller writes on the map
(`routing.journal.enabled`; not OME's). `history` takes the map and the Events listed in
its namespace (raw JSON, as the API server returns them) and keeps those regarding this
map (by UID) from the journal's controller, oldest first, one row each: when it was first
seen, its series count and last time, the home, the weight's move, the type and reason,
and the cause in words (the note after the home and weight).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ome_routing.core.journal import (
    ANNOTATION_HOME,
    ANNOTATION_PREVIOUS,
    ANNOTATION_WEIGHT,
    REPORTING_CONTROLLER,
)

HEADERS = ("TIME", "LAST SEEN", "COUNT", "TYPE", "REASON", "HOME", "WEIGHT", "CAUSE")


@dataclass(frozen=True, slots=True)
class HistoryRow:
    time: str
    lastSeen: str  # the document's field, as kubectl spells it
    count: int
    type: str
    reason: str
    home: str
    weight: str
    cause: str
    note: str


def history(tmap: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> list[HistoryRow]:
    """The map's journal, oldest first (by first time, then name)."""
    meta = tmap.get("metadata") or {}
    uid, name = meta.get("uid"), meta.get("name")
    rows: list[tuple[str, str, HistoryRow]] = []
    for event in events:
        regarding = event.get("regarding") or {}
        if event.get("reportingController") != REPORTING_CONTROLLER:
            continue
        if regarding.get("kind") != "TrafficMap" or regarding.get("name") != name:
            continue
        if uid and regarding.get("uid") != uid:
            continue
        row = _row(event)
        rows.append((row.time, str((event.get("metadata") or {}).get("name") or ""), row))
    rows.sort(key=lambda item: (item[0], item[1]))
    return [row for _, _, row in rows]


def _row(event: Mapping[str, Any]) -> HistoryRow:
    annotations = (event.get("metadata") or {}).get("annotations") or {}
    note = str(event.get("note") or "")
    home = str(annotations.get(ANNOTATION_HOME) or note.split(" ", 1)[0])
    previous = str(annotations.get(ANNOTATION_PREVIOUS) or "none")
    weight = str(annotations.get(ANNOTATION_WEIGHT) or "none")
    series = event.get("series") or {}
    first = str(event.get("eventTime") or "")
    return HistoryRow(
        time=first,
        lastSeen=str(series.get("lastObservedTime") or first),
        count=int(series.get("count") or 1),
        type=str(event.get("type") or ""),
        reason=str(event.get("reason") or ""),
        home=home,
        weight=weight if previous == weight else f"{previous} -> {weight}",
        cause=note.split(": ", 1)[1] if ": " in note else note,
        note=note,
    )


def _short(stamp: str) -> str:
    """An Event's MicroTime to the second, as the table shows it."""
    return stamp[:19] + "Z" if len(stamp) >= 19 else stamp


def table_rows(rows: Sequence[HistoryRow]) -> list[list[str]]:
    return [
        [
            _short(r.time),
            _short(r.lastSeen),
            str(r.count),
            r.type,
            r.reason,
            r.home,
            r.weight,
            r.cause,
        ]
        for r in rows
    ]


def document(tmap: Mapping[str, Any], rows: Sequence[HistoryRow]) -> dict[str, Any]:
    """`-o json|yaml`: the map named, and its rows in order."""
    meta = tmap.get("metadata") or {}
    return {
        "trafficMap": {"namespace": meta.get("namespace"), "name": meta.get("name")},
        "changes": [asdict(r) for r in rows],
    }
