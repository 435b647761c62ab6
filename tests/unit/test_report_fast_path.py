"""The fast path for the usual report shape reads exactly what the general parser reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core import report

SPACE = st.sampled_from(["", " ", "\n", "\t", "\r\n  "])


def general(body: bytes, monkeypatch: pytest.MonkeyPatch) -> report.Reading | str:
    with monkeypatch.context() as patch:
        patch.setattr(report, "_plain_report", lambda _body: None)
        try:
            return report.parse_report(body)
        except report.ReportError as err:
            return err.reason


@st.composite
def usual_bodies(draw: st.DrawFn) -> bytes:
    servable = draw(st.one_of(st.integers(0, 10**10), st.integers(2**31 - 3, 2**31 + 3)))
    moment = draw(
        st.one_of(
            st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 30)),
            st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(1, 1, 2)),
        )
    )
    offset = draw(st.integers(-23 * 60 - 59, 23 * 60 + 59))
    zone = draw(st.sampled_from(["Z", "z", "offset"]))
    separator = draw(st.sampled_from(["T", "T", "t"]))
    fraction = draw(st.text("0123456789", max_size=12))
    sign = "-" if offset < 0 else "+"
    suffix = zone if zone != "offset" else f"{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    stamp = (
        moment.strftime(f"%Y-%m-%d{separator}%H:%M:%S").rjust(19, "0")
        + (f".{fraction}" if fraction else "")
        + suffix
    )
    s = [draw(SPACE) for _ in range(8)]
    text = f'{s[0]}{{{s[1]}"servable"{s[2]}:{s[3]}{servable}{s[4]},{s[5]}"observedAt":{s[6]}"{stamp}"{s[7]}}}'
    return text.encode()


@settings(max_examples=300, deadline=None)
@given(usual_bodies())
def test_the_fast_path_agrees_with_the_general_parser(body: bytes) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = general(body, monkeypatch)
    try:
        actual: report.Reading | str = report.parse_report(body)
    except report.ReportError as err:
        actual = err.reason
    assert actual == expected


@pytest.mark.parametrize(
    "body",
    [
        b'{"servable": 4, "observedAt": "2026-02-30T10:00:00Z"}',  # no such day
        b'{"servable": 4, "observedAt": "2026-09-28T10:00:00+24:00"}',  # no such offset
        b'{"servable": 4, "observedAt": "2026-09-28T10:00:00+05:60"}',  # nor this one
        b'{"servable": 4, "observedAt": "2026-09-28T25:00:00Z"}',
        b'{"servable": 4, "observedAt": "0001-01-01T00:00:00Z"}',  # Go's zero time
        b'{"servable": 4, "observedAt": "0000-12-31T23:00:00-01:00"}',  # so is this
    ],
)
def test_impossible_times_in_the_usual_shape_get_the_general_reason(
    body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = general(body, monkeypatch)
    assert isinstance(expected, str) and expected.startswith("capacity ")
    with pytest.raises(report.ReportError) as caught:
        report.parse_report(body)
    assert caught.value.reason == expected


def test_the_usual_shape_is_read_by_the_fast_path() -> None:
    """Guard that the property above really exercises the fast path."""
    reading = report._plain_report(b'{"servable": 4, "observedAt": "2026-09-28T10:00:00.5+02:00"}')
    assert reading == report.Reading(
        4, datetime(2026, 9, 28, 10, 0, 0, 500000, tzinfo=timezone(timedelta(hours=2)))
    )
    assert reading is not None and reading.observed_at.astimezone(UTC).hour == 8


@settings(max_examples=200, deadline=None)
@given(usual_bodies(), st.randoms(use_true_random=False))
def test_keys_in_any_case_read_as_the_usual_shape_does(body: bytes, rng: Random) -> None:
    """Go matches keys case-insensitively: only the general path sees such keys."""
    recased = body
    for key in (b"servable", b"observedAt"):
        changed = bytes(c ^ 0x20 if rng.random() < 0.5 else c for c in key)
        recased = recased.replace(b'"' + key + b'"', b'"' + changed + b'"')
    try:
        expected: report.Reading | str = report.parse_report(body)
    except report.ReportError as err:
        expected = err.reason
    try:
        actual: report.Reading | str = report.parse_report(recased)
    except report.ReportError as err:
        actual = err.reason
    assert actual == expected
