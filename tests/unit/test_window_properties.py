"""Properties of the capacity window and allocation, over random poll histories."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from builders import T0
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.allocation import CapacitySource, allocate
from ome_routing.core.capacity import (
    NO_REPORT_YET,
    Verdict,
    Window,
    WindowSettings,
    WindowState,
    awaiting_quorum_reason,
    empty_window,
    expired_reason,
    judge,
    next_change,
    record_and_judge,
    record_failure,
    record_reading,
    state,
    verdict,
)
from ome_routing.core.durations import SECOND, Duration
from ome_routing.core.report import FUTURE, Reading, stale_reason

EXAMPLES = 100


@dataclass(frozen=True)
class Poll:
    gap_ms: int  # since the previous poll
    servable: int | None  # None: the poll failed
    lag_ms: int  # now - observedAt; negative is a report from the future


window_settings = st.integers(min_value=1, max_value=8).flatmap(
    lambda samples: st.builds(
        WindowSettings,
        samples=st.just(samples),
        quorum=st.integers(min_value=1, max_value=samples),
        max_age=st.integers(min_value=1, max_value=60).map(lambda s: Duration(s * SECOND)),
    )
)
polls = st.lists(
    st.builds(
        Poll,
        gap_ms=st.integers(min_value=0, max_value=30_000),
        servable=st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
        lag_ms=st.integers(min_value=-2_000, max_value=70_000),
    ),
    max_size=20,
)


def replay(window: Window, history: list[Poll]) -> tuple[Window, datetime]:
    now = T0
    for poll in history:
        now += timedelta(milliseconds=poll.gap_ms)
        if poll.servable is None:
            window = record_failure(window, "capacity endpoint returned HTTP 503")
        else:
            reading = Reading(poll.servable, now - timedelta(milliseconds=poll.lag_ms))
            window = record_reading(window, reading, now)
    return window, now


def fresh(window: Window, now: datetime) -> list[int]:
    limit = window.settings.max_age.ceil_timedelta()
    return [r.servable for r in window.readings if now - r.observed_at < limit]


@given(
    window_settings,
    polls,
    st.integers(min_value=0, max_value=12),
    st.integers(min_value=0, max_value=40_000),
)
@settings(max_examples=EXAMPLES)
def test_a_report_can_lower_allocated_but_never_raise_it(
    config: WindowSettings, history: list[Poll], admitted: int, later_ms: int
) -> None:
    window, now = replay(empty_window(config), history)
    now += timedelta(milliseconds=later_ms)
    result = verdict(window, now)
    allocation = allocate(admitted, result.ceiling)
    assert allocation.allocated <= admitted
    if result.ceiling is None:
        assert allocation.allocated == admitted
        assert allocation.source is CapacitySource.CONTROL_PLANE
        assert allocation.reported is None
    else:
        assert allocation.allocated == min(admitted, result.ceiling)
        assert allocation.reported == result.ceiling
        assert (allocation.source is CapacitySource.ENDPOINT) == (result.ceiling < admitted)


@given(window_settings, polls, st.integers(min_value=0, max_value=12))
@settings(max_examples=EXAMPLES)
def test_a_failed_poll_never_removes_traffic(
    config: WindowSettings, history: list[Poll], admitted: int
) -> None:
    window, now = replay(empty_window(config), history)
    window = record_failure(window, "capacity endpoint unreachable: connection refused")
    result = verdict(window, now)
    assert result.ceiling is None
    assert allocate(admitted, result.ceiling).allocated == admitted


@given(window_settings, polls, st.integers(min_value=0, max_value=40_000))
@settings(max_examples=EXAMPLES)
def test_the_ceiling_is_a_kept_fresh_reading_and_the_quorum_th_lowest(
    config: WindowSettings, history: list[Poll], later_ms: int
) -> None:
    window, now = replay(empty_window(config), history)
    now += timedelta(milliseconds=later_ms)
    result = verdict(window, now)
    values = fresh(window, now)
    assert len(window.readings) <= config.samples
    if result.ceiling is None:
        assert len(values) < config.quorum
        assert state(window, now) is not WindowState.USABLE
    else:
        assert result.ceiling in values
        # at most quorum - 1 readings lie below it; at least quorum lie at or below it
        assert sum(value < result.ceiling for value in values) < config.quorum
        assert sum(value <= result.ceiling for value in values) >= config.quorum


@given(
    st.integers(min_value=1, max_value=6).flatmap(
        lambda quorum: st.tuples(
            st.just(quorum),
            st.lists(st.integers(min_value=5, max_value=12), min_size=quorum, max_size=quorum + 4),
            st.lists(st.integers(min_value=0, max_value=4), max_size=quorum - 1),
            st.randoms(use_true_random=False),
        )
    )
)
@settings(max_examples=EXAMPLES)
def test_up_to_quorum_minus_one_low_outliers_never_set_the_ceiling(
    case: tuple[int, list[int], list[int], object],
) -> None:
    quorum, normal, outliers, rng = case
    values = normal + outliers
    rng.shuffle(values)  # type: ignore[attr-defined]
    window = empty_window(
        WindowSettings(samples=len(values), quorum=quorum, max_age=Duration(60 * SECOND))
    )
    now = T0
    for value in values:
        now += timedelta(seconds=1)
        window = record_reading(window, Reading(value, now), now)
    ceiling = verdict(window, now).ceiling
    assert ceiling is not None
    assert ceiling >= min(normal)


@given(window_settings, polls)
@settings(max_examples=EXAMPLES)
def test_the_verdict_holds_until_next_change(config: WindowSettings, history: list[Poll]) -> None:
    window, now = replay(empty_window(config), history)
    before = verdict(window, now)
    moment = next_change(window, now)
    if moment is None:
        assert verdict(window, now + timedelta(days=365)) == before
        return
    assert moment > now
    # the verdict can only change when a reading ages out: check every such moment before it
    step = config.max_age.ceil_timedelta()
    expiries = {reading.observed_at + step for reading in window.readings}
    for each in sorted(e for e in expiries if now < e < moment):
        assert verdict(window, each) == before
    assert verdict(window, moment - timedelta(microseconds=1)) == before
    # and not sooner than it must: a home is judged again between polls only for a change
    assert verdict(window, moment) != before


@given(window_settings, polls)
@settings(max_examples=EXAMPLES)
def test_quorum_fresh_polls_after_a_failure_give_a_ceiling(
    config: WindowSettings, history: list[Poll]
) -> None:
    window, now = replay(empty_window(config), history)
    window = record_failure(window, "capacity endpoint returned HTTP 404")
    for index in range(config.quorum):
        now += timedelta(milliseconds=1)
        if index < config.quorum - 1:
            assert verdict(record_reading(window, Reading(3, now), now), now).ceiling is None
        window = record_reading(window, Reading(3, now), now)
    assert verdict(window, now).ceiling == 3


# polls whose stamps keep pace with the clock (a steady reporter): they keep the window
# in `observedAt` order, where the window saves work
steady_polls = st.lists(
    st.builds(
        Poll,
        gap_ms=st.integers(min_value=0, max_value=30_000),
        servable=st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
        lag_ms=st.sampled_from([0, 1_000, 5_000]),
    ),
    max_size=20,
)


def plain(window: Window) -> Window:
    """The same window without what `record_reading` derives: every look is a full one."""
    return Window(window.settings, window.readings, window.failure, window.stale)


@given(window_settings, st.one_of(polls, steady_polls), st.integers(min_value=0, max_value=70_000))
@settings(max_examples=300)
def test_what_a_window_keeps_to_save_work_never_changes_what_it_says(
    config: WindowSettings, history: list[Poll], later_ms: int
) -> None:
    window, now = replay(empty_window(config), history)
    if window.ranked is not None:
        assert window.ranked == tuple(sorted(r.servable for r in window.readings))
    if window.ordered:
        stamps = [r.observed_at for r in window.readings]
        assert stamps == sorted(stamps)
    at = now + timedelta(milliseconds=later_ms)
    assert verdict(window, at) == verdict(plain(window), at)
    assert next_change(window, at) == next_change(plain(window), at)
    reading = Reading(3, at - timedelta(milliseconds=100))
    after, after_plain = (
        record_reading(window, reading, at),
        record_reading(plain(window), reading, at),
    )
    assert after == after_plain
    assert verdict(after, at) == verdict(after_plain, at)


@given(window_settings, polls)
@settings(max_examples=EXAMPLES)
def test_recording_and_judging_in_one_step_says_what_the_two_steps_say(
    config: WindowSettings, history: list[Poll]
) -> None:
    window, now = empty_window(config), T0
    for poll in history:
        now += timedelta(milliseconds=poll.gap_ms)
        if poll.servable is None:
            window = record_failure(window, "capacity endpoint returned HTTP 503")
            continue
        reading = Reading(poll.servable, now - timedelta(milliseconds=poll.lag_ms))
        expected = record_reading(window, reading, now)
        window, judged, change = record_and_judge(window, reading, now)
        assert window == expected
        assert (window.ordered, window.ranked) == (expected.ordered, expected.ranked)
        assert (judged, change) == judge(expected, now)


def test_a_steady_reporter_keeps_the_window_ordered_and_ranked() -> None:
    """Guard that the property above reaches the window's short paths."""
    config = WindowSettings(samples=3, quorum=2, max_age=Duration(30 * SECOND))
    window, _ = replay(
        empty_window(config), [Poll(1_000, servable, 0) for servable in (5, 2, 7, 4)]
    )
    assert window.ordered
    assert window.ranked == (2, 4, 7)
    assert [r.servable for r in window.readings] == [2, 7, 4]


def test_a_full_window_whose_two_oldest_readings_aged_out_keeps_only_its_fresh_ones() -> None:
    """A steady reporter's full window loses more than its oldest reading to age."""
    config = WindowSettings(samples=3, quorum=2, max_age=Duration(30 * SECOND))
    window, now = replay(
        empty_window(config), [Poll(0, 5, 0), Poll(1_000, 2, 0), Poll(19_000, 7, 0)]
    )
    assert window.ordered and len(window.readings) == 3
    at = now + timedelta(milliseconds=11_500)  # 31.5 s after the first, 30.5 s after the second
    after = record_reading(window, Reading(4, at), at)
    assert [r.servable for r in after.readings] == [7, 4]
    assert after.ranked == (4, 7)
    assert after == record_reading(plain(window), Reading(4, at), at)
    assert verdict(after, at) == Verdict(7, None)


def test_a_one_sample_window_fails_a_newer_reading_that_is_already_stale() -> None:
    config = WindowSettings(samples=1, quorum=1, max_age=Duration(30 * SECOND))
    window, now = replay(empty_window(config), [Poll(0, 5, 0)])
    at = now + timedelta(seconds=40)
    after = record_reading(window, Reading(4, now + timedelta(seconds=5)), at)
    assert after == Window(config, failure=stale_reason(config.max_age), stale=True)
    assert verdict(after, at) == Verdict(None, stale_reason(config.max_age))


class OmeWindow:
    """OME's window, step for step (`expire`, `record_success`, `record_failure`): the model."""

    def __init__(self, config: WindowSettings) -> None:
        self.config = config
        self.samples: list[tuple[int, datetime]] = []  # (servable, expiresAt)
        self.reported: int | None = None
        self.reason: str | None = NO_REPORT_YET

    def _settle(self, after_expiry: bool) -> None:
        quorum = self.config.quorum
        if len(self.samples) >= quorum:
            self.reported, self.reason = sorted(v for v, _ in self.samples)[quorum - 1], None
        elif after_expiry and not self.samples:
            self.reported, self.reason = None, stale_reason(self.config.max_age)
        else:
            count = len(self.samples)
            self.reported = None
            self.reason = (expired_reason if after_expiry else awaiting_quorum_reason)(
                count, quorum
            )

    def expire(self, now: datetime) -> None:
        kept = [sample for sample in self.samples if sample[1] > now]
        if len(kept) < len(self.samples):
            self.samples = kept
            self._settle(after_expiry=True)

    def record_success(self, servable: int, observed_at: datetime, now: datetime) -> None:
        expires_at = observed_at + self.config.max_age.ceil_timedelta()
        if expires_at <= now:
            self.record_failure(stale_reason(self.config.max_age))
            return
        self.expire(now)
        self.samples = [*self.samples, (servable, expires_at)][-self.config.samples :]
        self._settle(after_expiry=False)

    def record_failure(self, reason: str) -> None:
        self.samples, self.reported, self.reason = [], None, reason


@given(window_settings, polls, st.lists(st.integers(min_value=0, max_value=40_000), max_size=4))
@settings(max_examples=300)
def test_the_window_says_what_omes_window_says_at_every_moment(
    config: WindowSettings, history: list[Poll], looks_ms: list[int]
) -> None:
    """Between polls, the verdict at any moment is OME's after its `expire` at that moment."""
    window, model, now = empty_window(config), OmeWindow(config), T0
    for poll in history:
        for look in sorted(look % max(poll.gap_ms, 1) for look in looks_ms):
            moment = now + timedelta(milliseconds=look)
            model.expire(moment)
            assert verdict(window, moment) == Verdict(model.reported, model.reason)
        now += timedelta(milliseconds=poll.gap_ms)
        observed_at = now - timedelta(milliseconds=poll.lag_ms)
        if poll.servable is None:
            window = record_failure(window, "capacity endpoint returned HTTP 503")
            model.record_failure("capacity endpoint returned HTTP 503")
        elif observed_at > now:
            window = record_reading(window, Reading(poll.servable, observed_at), now)
            model.record_failure(FUTURE)
        else:
            window = record_reading(window, Reading(poll.servable, observed_at), now)
            model.record_success(poll.servable, observed_at, now)
        assert verdict(window, now) == Verdict(model.reported, model.reason)
