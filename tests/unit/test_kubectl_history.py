"""`kubectl ome traffic history`'s pure report: the map's journal Events, oldest first."""

from __future__ import annotations

from typing import Any

from ome_routing.kubectl.table import render_table
from ome_routing.kubectl.traffic_history import HEADERS, document, history, table_rows

TMAP = {"metadata": {"namespace": "prod", "name": "chat", "uid": "u-1"}}


def an_event(
    note: str,
    at: str,
    *,
    reason: str = "CeilingChanged",
    count: int | None = None,
    last: str | None = None,
    uid: str = "u-1",
    controller: str = "routing.ome-routing.io/placement-routing",
    weights: tuple[str, str] = ("2", "1"),
    name: str = "chat.1",
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "metadata": {
            "name": name,
            "annotations": {
                "routing.ome-routing.io/home": note.split(" ", 1)[0],
                "routing.ome-routing.io/previous-weight": weights[0],
                "routing.ome-routing.io/weight": weights[1],
            },
        },
        "eventTime": at,
        "reportingController": controller,
        "reason": reason,
        "type": "Normal",
        "note": note,
        "regarding": {"kind": "TrafficMap", "name": "chat", "namespace": "prod", "uid": uid},
    }
    if count is not None:
        event["series"] = {"count": count, "lastObservedTime": last}
    return event


DROP = "worker-b weight 2 -> 1: ceiling 3 -> 1 after 3 readings of 1 (quorum 3)"


def test_rows_are_the_maps_journal_oldest_first() -> None:
    events = [
        an_event(DROP, "2026-12-03T03:12:04.118000Z", name="chat.2"),
        an_event(
            "worker-a weight none -> 1: home added",
            "2026-12-03T03:02:11.000000Z",
            reason="HomeAdded",
            weights=("", "1"),
        ),
        an_event(DROP, "2026-12-03T03:00:00.000000Z", uid="an-older-map"),
        an_event(DROP, "2026-12-03T03:00:00.000000Z", controller="someone-else"),
    ]
    rows = history(TMAP, events)
    assert [(r.reason, r.home, r.weight) for r in rows] == [
        ("HomeAdded", "worker-a", "none -> 1"),
        ("CeilingChanged", "worker-b", "2 -> 1"),
    ]
    assert rows[1].cause == "ceiling 3 -> 1 after 3 readings of 1 (quorum 3)"


def test_the_table_shows_series_counts_and_times_to_the_second() -> None:
    events = [
        an_event(
            DROP,
            "2026-12-03T03:12:04.118000Z",
            count=7,
            last="2026-12-03T03:24:10.500000Z",
        )
    ]
    table = render_table(HEADERS, table_rows(history(TMAP, events)))
    assert table.splitlines() == [
        "TIME                   LAST SEEN              COUNT   TYPE     REASON           HOME       WEIGHT   CAUSE",
        "2026-12-03T03:12:04Z   2026-12-03T03:24:10Z   7       Normal   CeilingChanged   worker-b   2 -> 1   ceiling 3 -> 1 after 3 readings of 1 (quorum 3)",
    ]


def test_the_document_names_the_map_and_keeps_the_note() -> None:
    rows = history(TMAP, [an_event(DROP, "2026-12-03T03:12:04.118000Z")])
    doc = document(TMAP, rows)
    assert doc["trafficMap"] == {"namespace": "prod", "name": "chat"}
    assert doc["changes"][0]["note"] == DROP
    assert doc["changes"][0]["count"] == 1
