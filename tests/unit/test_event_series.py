"""The journal's Event aggregation and rate limit, with client-go's numbers and a set clock.

`core.eventseries`: the token bucket (`tools/record`'s spam filter: 25 at once, one more
every 5 minutes) and the series window (`tools/events`' finishTime: 6 minutes); then the
writer's decisions (`kube.journal.Journal.record`), which queue writes and send nothing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.eventseries import BURST, REFILL, SERIES_WINDOW, Bucket, Series, writes_bound
from ome_routing.core.journal import Cause, Change, Reason
from ome_routing.kube.journal import Journal

T0 = datetime(2026, 12, 3, 3, 12, tzinfo=UTC)
MAP = {"metadata": {"namespace": "team-a", "name": "llama", "uid": "u-1"}}


def test_client_go_numbers() -> None:
    assert (25, timedelta(minutes=5), timedelta(minutes=6)) == (BURST, REFILL, SERIES_WINDOW)


def test_the_bound_per_map() -> None:
    assert writes_bound(timedelta(minutes=1)) == 25
    assert writes_bound(timedelta(minutes=5)) == 26
    assert writes_bound(timedelta(hours=1)) == 37


def test_a_full_bucket_gives_its_burst_then_one_every_refill() -> None:
    bucket = Bucket.full(T0)
    given_ = 0
    for _ in range(40):
        bucket, ok = bucket.take(T0)
        given_ += ok
    assert given_ == 25
    bucket, ok = bucket.take(T0 + REFILL - timedelta(seconds=1))
    assert not ok
    bucket, ok = bucket.take(T0 + REFILL)
    assert ok
    assert bucket.next_token(T0 + REFILL) == T0 + 2 * REFILL


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3_600_000), min_size=1, max_size=300))
def test_no_stretch_of_time_gets_more_than_the_bound(offsets_ms: list[int]) -> None:
    """Whatever the times asked at, the tokens given in [first, last] stay in the bound."""
    times = sorted(T0 + timedelta(milliseconds=ms) for ms in offsets_ms)
    bucket = Bucket.full(times[0])
    granted: list[datetime] = []
    for moment in times:
        bucket, ok = bucket.take(moment)
        if ok:
            granted.append(moment)
    for i, start in enumerate(granted):
        inside = [t for t in granted[i:] if t - start <= timedelta(minutes=30)]
        assert len(inside) <= writes_bound(timedelta(minutes=30))


def test_a_repeat_joins_the_series_within_its_window_only() -> None:
    series = Series("llama.1", T0, T0)
    assert series.open(T0 + SERIES_WINDOW - timedelta(microseconds=1))
    assert not series.open(T0 + SERIES_WINDOW)
    later = series.repeat(T0 + timedelta(minutes=5))
    assert (later.count, later.last, later.behind) == (2, T0 + timedelta(minutes=5), True)
    assert later.open(T0 + timedelta(minutes=10))
    assert not later.wrote(2).behind


# --- the writer's decisions ------------------------------------------------------------


def a_change(weight: int, previous: int, text: str = "ceiling 3 -> 1") -> Change:
    return Change("worker-b", previous, weight, (Reason(Cause.CEILING_CHANGED, text),))


@pytest.fixture
def journal() -> Any:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield Journal(client=None, clock=lambda: T0, instance="test")  # type: ignore[arg-type]
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def outcomes(journal: Journal, changes: list[tuple[Change, datetime]]) -> list[str]:
    seen: list[str] = []
    for change, moment in changes:
        seen.append(journal._decide(journal_ref(), change, moment))
    return seen


def journal_ref() -> Any:
    from ome_routing.kube.journal import map_ref

    return map_ref(MAP)


def test_a_flapping_home_makes_two_events_and_updates_their_series(journal: Journal) -> None:
    """2 -> 1 and 1 -> 2, every 10 seconds for 5 minutes: two Events, the rest series."""
    down, up = a_change(1, 2), a_change(2, 1, "ceiling 1 -> 3")
    flaps = [((down, up)[i % 2], T0 + timedelta(seconds=10 * i)) for i in range(30)]
    seen = outcomes(journal, flaps)
    assert seen[:2] == ["created", "created"]
    assert seen.count("created") == 2
    assert seen.count("series") == BURST - 2
    assert seen.count("series held") == 30 - BURST
    counts = sorted(s.count for s in journal.series().values())
    assert counts == [15, 15]


def test_a_held_series_update_is_sent_with_the_next_token(journal: Journal) -> None:
    down = a_change(1, 2)
    outcomes(journal, [(down, T0 + timedelta(seconds=i)) for i in range(BURST + 3)])
    (key, series), *_ = journal.series().items()
    assert series.behind and series.count == BURST + 3
    journal._tracked[key].series = Series(
        "llama.1", series.first, series.last, series.count, series.written
    )
    journal.flush(T0 + timedelta(seconds=60))
    assert journal.series()[key].behind  # no token yet
    journal.flush(T0 + REFILL)
    assert not journal.series()[key].behind
    assert journal._queue.qsize() == BURST + 1


def test_a_new_event_without_a_token_is_dropped(journal: Journal) -> None:
    seen = outcomes(
        journal,
        [
            (a_change(1, 2, f"ceiling {i} -> 1"), T0 + timedelta(seconds=i))
            for i in range(BURST + 2)
        ],
    )
    assert seen == ["created"] * BURST + ["dropped", "dropped"]


def test_a_repeat_after_the_window_is_a_new_event(journal: Journal) -> None:
    down = a_change(1, 2)
    seen = outcomes(journal, [(down, T0), (down, T0 + SERIES_WINDOW + timedelta(seconds=1))])
    assert seen == ["created", "created"]


def test_maps_have_their_own_buckets(journal: Journal) -> None:
    from ome_routing.kube.journal import MapRef

    for i in range(BURST):
        journal._decide(journal_ref(), a_change(1, 2, f"t{i}"), T0)
    assert journal._decide(journal_ref(), a_change(1, 2, "more"), T0) == "dropped"
    assert (
        journal._decide(MapRef("team-a", "other", "u-2"), a_change(1, 2, "more"), T0) == "created"
    )


def test_record_logs_one_line_per_change_with_its_facts(
    journal: Journal, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="ome_routing.journal")
    journal.record(MAP, [a_change(1, 2, "ceiling 3 -> 1 after 3 readings of 1 (quorum 3)")], T0)
    (record,) = caplog.records
    assert record.getMessage() == "trafficmap entry changed"
    fields = {
        k: getattr(record, k)
        for k in (
            "trafficmap",
            "home",
            "previousWeight",
            "weight",
            "reason",
            "type",
            "note",
            "event",
        )
    }
    assert fields == {
        "trafficmap": "team-a/llama",
        "home": "worker-b",
        "previousWeight": 2,
        "weight": 1,
        "reason": "CeilingChanged",
        "type": "Normal",
        "note": "worker-b weight 2 -> 1: ceiling 3 -> 1 after 3 readings of 1 (quorum 3)",
        "event": "created",
    }
