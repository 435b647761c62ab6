"""The poll's convergence bounds: the numbers, and the window keeping to them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from builders import T0
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.capacity import (
    Window,
    WindowSettings,
    empty_window,
    record_failure,
    record_reading,
    verdict,
)
from ome_routing.core.convergence import Bounds, bounds, describe
from ome_routing.core.durations import MILLISECOND, SECOND, Duration
from ome_routing.core.report import Reading

HIGH, LOW = 9, 2


def d(text: str) -> Duration:
    return Duration.parse(text)


@st.composite
def poll_settings(draw: st.DrawFn) -> Bounds:
    """Settings that OME accepts: maxAge spans at least quorum periods."""
    samples = draw(st.integers(min_value=1, max_value=12))
    quorum = draw(st.integers(min_value=1, max_value=samples))
    period = Duration(draw(st.integers(min_value=1, max_value=20)) * 500 * MILLISECOND)
    spare = draw(st.integers(min_value=0, max_value=60_000)) * MILLISECOND
    return bounds(samples, quorum, period, Duration((period * quorum).nanoseconds + spare))


class Steady:
    """A reporter polled every period, that stamps each answer when it is polled."""

    def __init__(self, found: Bounds) -> None:
        self.period = found.period.ceil_timedelta()
        self.window: Window = empty_window(
            WindowSettings(samples=found.samples, quorum=found.quorum, max_age=found.max_age)
        )
        self.now: datetime = T0

    def poll(self, servable: int, observed_at: datetime | None = None) -> int | None:
        self.now += self.period
        stamp = self.now if observed_at is None else observed_at
        self.window = record_reading(self.window, Reading(servable, stamp), self.now)
        return verdict(self.window, self.now).ceiling

    def settle(self, servable: int, found: Bounds) -> None:
        for _ in range(found.samples + found.kept + 2):
            self.poll(servable)
        assert verdict(self.window, self.now).ceiling == servable


@given(poll_settings())
@settings(max_examples=200)
def test_a_drop_applies_at_exactly_the_quorum_th_low_reading(found: Bounds) -> None:
    reporter = Steady(found)
    reporter.settle(HIGH, found)
    seen = [reporter.poll(LOW) for _ in range(found.drop_polls)]
    assert seen == [HIGH] * (found.drop_polls - 1) + [LOW]


@given(poll_settings(), st.integers(min_value=0, max_value=999))
@settings(max_examples=200)
def test_a_drop_never_applies_between_polls_before_the_quorum_th(
    found: Bounds, fraction: int
) -> None:
    reporter = Steady(found)
    reporter.settle(HIGH, found)
    for _ in range(found.drop_polls - 1):
        reporter.poll(LOW)
        between = reporter.now + reporter.period * fraction / 1000
        assert verdict(reporter.window, between).ceiling == HIGH


@given(poll_settings())
@settings(max_examples=200)
def test_a_rise_applies_at_exactly_the_bound_at_poll_moments(found: Bounds) -> None:
    reporter = Steady(found)
    reporter.settle(LOW, found)
    seen = [reporter.poll(HIGH) for _ in range(found.rise_polls)]
    assert seen == [LOW] * (found.rise_polls - 1) + [HIGH]


@given(poll_settings(), st.integers(min_value=1, max_value=20))
@settings(max_examples=200)
def test_a_frozen_reporter_loses_the_ceiling_within_max_age(found: Bounds, polls: int) -> None:
    reporter = Steady(found)
    reporter.settle(HIGH, found)
    frozen_at = reporter.now
    expiry = frozen_at + found.max_age.ceil_timedelta()
    for _ in range(polls):
        if reporter.now + reporter.period < expiry:
            reporter.poll(HIGH, observed_at=frozen_at)
    assert verdict(reporter.window, expiry).ceiling is None
    assert verdict(reporter.window, expiry + timedelta(days=1)).ceiling is None
    while reporter.now < expiry:
        reporter.now += reporter.period
    # polls that go on reading the frozen stamp cannot bring the ceiling back
    assert reporter.poll(HIGH, observed_at=frozen_at) is None
    assert reporter.poll(HIGH, observed_at=frozen_at) is None


@given(poll_settings())
@settings(max_examples=200)
def test_a_failed_poll_keeps_admitted_for_exactly_quorum_polls(found: Bounds) -> None:
    reporter = Steady(found)
    reporter.settle(LOW, found)
    reporter.now += reporter.period
    reporter.window = record_failure(reporter.window, "capacity endpoint returned HTTP 503")
    failed_at = reporter.now
    seen = [reporter.poll(LOW) for _ in range(found.quorum)]
    assert seen == [None] * (found.quorum - 1) + [LOW]
    assert reporter.now - failed_at == found.fallback_time.ceil_timedelta()


class TestNumbers:
    def test_the_chart_example(self) -> None:
        """samples 10, quorum 2, period 10s, maxAge 30s: only 3 readings count at once."""
        found = bounds(10, 2, d("10s"), d("30s"))
        assert (found.kept, found.drop_polls, found.rise_polls) == (3, 2, 2)
        assert (str(found.drop_time), str(found.rise_time), str(found.fallback_time)) == (
            "20s",
            "20s",
            "20s",
        )

    def test_the_spec_service_example(self) -> None:
        """samples 4, quorum 3, period 10s, maxAge 40s: the window holds all 4."""
        found = bounds(4, 3, d("10s"), d("40s"))
        assert (found.kept, found.drop_polls, found.rise_polls) == (4, 3, 2)
        assert str(found.fallback_time) == "30s"

    def test_samples_bound_the_window_when_max_age_is_long(self) -> None:
        found = bounds(10, 3, d("1s"), d("1m"))
        assert (found.kept, found.rise_polls, str(found.rise_time)) == (10, 8, "8s")

    def test_a_max_age_between_periods_counts_the_reading_it_still_covers(self) -> None:
        assert bounds(10, 2, d("10s"), d("25s")).kept == 3
        assert bounds(10, 2, d("10s"), d("30.000000001s")).kept == 4

    @pytest.mark.parametrize(
        ("samples", "quorum", "max_age", "message"),
        [
            (2, 3, "30s", r"quorum \(3\) must be at least 1 and at most samples \(2\)"),
            (4, 3, "20s", r"maxAge \(20s\) must span at least quorum \(3\) period intervals"),
        ],
    )
    def test_refuses_settings_oome_refuses(
        self, samples: int, quorum: int, max_age: str, message: str
    ) -> None:
        with pytest.raises(ValueError, match=message):
            bounds(samples, quorum, d("10s"), d(max_age))


class TestLines:
    def test_one_line_per_bound_with_the_numbers(self) -> None:
        assert describe(bounds(10, 2, d("10s"), d("30s"))) == [
            "a drop in the count applies at the 2nd poll that reads it (quorum 2): "
            "20s at period 10s",
            "a rise in the count applies by the 2nd poll that reads it "
            "(3 readings within maxAge 30s, minus quorum 2, plus 1): 20s at period 10s",
            "a frozen reporter loses the ceiling within maxAge (30s) of its last observedAt",
            "a failed poll keeps the admitted replicas for at least quorum (2) polls: "
            "20s at period 10s",
        ]

    def test_the_rise_names_samples_when_they_bound_the_window(self) -> None:
        lines = describe(bounds(4, 3, d("10s"), d("40s")))
        assert lines[0].startswith("a drop in the count applies at the 3rd poll")
        assert lines[1] == (
            "a rise in the count applies by the 2nd poll that reads it "
            "(samples 4, minus quorum 3, plus 1): 20s at period 10s"
        )

    @pytest.mark.parametrize(
        ("quorum", "ordinal"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th")]
    )
    def test_ordinals(self, quorum: int, ordinal: str) -> None:
        line = describe(bounds(20, quorum, Duration(SECOND), d("1m")))[0]
        assert f"at the {ordinal} poll" in line
