"""The capacity window: quorum ceiling, failures, staleness, expiry, and its named states."""

from __future__ import annotations

from datetime import timedelta

import pytest
from builders import T0, a_reading, a_window, at, polled, settings

from ome_routing.core.capacity import (
    NO_REPORT_YET,
    Verdict,
    Window,
    WindowSettings,
    WindowState,
    awaiting_quorum_reason,
    empty_window,
    expired_reason,
    fallback_reason,
    next_change,
    record_and_judge,
    record_failure,
    record_reading,
    state,
    verdict,
)
from ome_routing.core.durations import Duration
from ome_routing.core.report import Reading


def ceiling_of(window: Window, seconds: float) -> int | None:
    return verdict(window, at(seconds)).ceiling


def reason_of(window: Window, seconds: float) -> str | None:
    return verdict(window, at(seconds)).fallback_reason


class TestQuorumCeiling:
    def test_one_low_reading_cannot_set_the_ceiling_alone(self) -> None:
        """Spec: with quorum 2, the readings 4, 1 and 4 give a ceiling of 4."""
        window = polled(a_window(quorum=2), 4, 1, 4)
        assert verdict(window, at(20)) == Verdict(4, None)

    def test_two_low_readings_set_the_ceiling(self) -> None:
        """Spec: with quorum 2, the readings 1, 4 and 1 give a ceiling of 1."""
        window = polled(a_window(quorum=2), 1, 4, 1)
        assert verdict(window, at(20)) == Verdict(1, None)

    @pytest.mark.parametrize(
        ("quorum", "values", "ceiling"),
        [
            (1, (5, 3, 9), 3),
            (2, (5, 3, 9), 5),
            (3, (5, 3, 9), 9),
            (2, (0, 0, 7), 0),
            (2, (7, 7, 7), 7),
            (3, (4, 1, 4, 1, 4), 4),
        ],
    )
    def test_the_quorum_th_lowest_reading_is_the_ceiling(
        self, quorum: int, values: tuple[int, ...], ceiling: int
    ) -> None:
        window = polled(a_window(samples=10, quorum=quorum, max_age="1m"), *values)
        assert ceiling_of(window, 10 * (len(values) - 1)) == ceiling

    def test_a_ceiling_of_zero_is_a_ceiling(self) -> None:
        window = polled(a_window(quorum=2), 0, 0)
        assert verdict(window, at(10)) == Verdict(0, None)

    def test_quorum_polls_give_the_first_ceiling(self) -> None:
        """Spec: with quorum 3, a home gets its ceiling from the third poll on."""
        window = a_window(samples=4, quorum=3, max_age="40s")
        reasons = []
        for poll, value in enumerate((2, 2, 2)):
            window = polled(window, value, start=10 * poll)
            reasons.append(verdict(window, at(10 * poll)))
        assert reasons == [
            Verdict(None, "capacity report awaiting quorum (1/3 accepted samples)"),
            Verdict(None, "capacity report awaiting quorum (2/3 accepted samples)"),
            Verdict(2, None),
        ]

    def test_repeated_observed_at_still_counts(self) -> None:
        """A reporter that holds a figure returns the same observedAt; each poll counts."""
        window = a_window(quorum=3, max_age="40s")
        for poll in range(3):
            window = record_reading(window, a_reading(2, observed=0), at(5 * poll))
        assert len(window.readings) == 3
        assert verdict(window, at(10)) == Verdict(2, None)


class TestSamplesBound:
    def test_keeps_only_the_last_samples_readings(self) -> None:
        window = polled(a_window(samples=3, quorum=1, max_age="10m"), 1, 5, 6, 7, period=1)
        assert [reading.servable for reading in window.readings] == [5, 6, 7]

    def test_the_oldest_low_reading_drops_out(self) -> None:
        """samples 3, quorum 1: the 1 leaves the window on the fourth poll, and the ceiling rises."""
        window = polled(a_window(samples=3, quorum=1, max_age="10m"), 1, 5, 6, period=1)
        assert ceiling_of(window, 2) == 1
        window = polled(window, 7, start=3)
        assert ceiling_of(window, 3) == 5

    def test_samples_one_follows_the_last_reading(self) -> None:
        window = a_window(samples=1, quorum=1)
        for poll, value in enumerate((3, 1, 4)):
            window = polled(window, value, start=poll)
            assert ceiling_of(window, poll) == value


class TestFailedPolls:
    def test_a_failed_poll_clears_the_window_and_shows_its_reason_verbatim(self) -> None:
        window = polled(a_window(quorum=2), 1, 1)
        window = record_failure(window, "capacity endpoint returned HTTP 404")
        assert window.readings == ()
        assert verdict(window, at(20)) == Verdict(None, "capacity endpoint returned HTTP 404")

    @pytest.mark.parametrize(
        "reason",
        [
            "capacity endpoint unreachable: connection refused",
            "capacity endpoint returned HTTP 301",
            "capacity response is not a valid report: empty body",
            "capacity report has no servable count",
            "capacity report has no observedAt stamp",
            "capacity report is negative (-1)",
            "reading capacity response: response exceeds configured limit of 65536 bytes",
            "capacity request did not complete: timeout",
            "capacity target is invalid: no host",
            "capacity request URL is invalid: bad port",
            "capacity request could not be built: bad method",
            "capacity observation could not be submitted: shutting down",
        ],
    )
    def test_every_poll_failure_reason_passes_through(self, reason: str) -> None:
        window = record_failure(polled(a_window(), 3, 3), reason)
        assert state(window, at(20)) is WindowState.FAILED
        assert reason_of(window, 20) == reason

    def test_quorum_polls_in_a_row_after_a_failure_bring_the_ceiling_back(self) -> None:
        window = polled(a_window(samples=4, quorum=3, max_age="40s"), 1, 1, 1)
        window = record_failure(window, "capacity endpoint returned HTTP 404")
        seen = []
        for poll in range(3):
            window = polled(window, 1, start=40 + 10 * poll)
            seen.append(verdict(window, at(40 + 10 * poll)))
        assert seen == [
            Verdict(None, "capacity report awaiting quorum (1/3 accepted samples)"),
            Verdict(None, "capacity report awaiting quorum (2/3 accepted samples)"),
            Verdict(1, None),
        ]

    def test_a_failure_between_successes_starts_the_count_over(self) -> None:
        window = polled(a_window(quorum=3), 1, 1)
        window = record_failure(window, "capacity endpoint returned HTTP 503")
        window = polled(window, 1, 1, start=30)
        assert reason_of(window, 40) == "capacity report awaiting quorum (2/3 accepted samples)"

    def test_a_failure_keeps_the_settings(self) -> None:
        window = record_failure(a_window(samples=4, quorum=3), "boom")
        assert window.settings == settings(samples=4, quorum=3)


class TestStaleAndFutureReports:
    def test_a_report_already_stale_when_it_arrives_fails_the_poll(self) -> None:
        window = polled(a_window(samples=4, quorum=1, max_age="40s"), 3)
        window = record_reading(window, a_reading(2, observed=0), at(50))
        assert window.readings == ()
        assert state(window, at(50)) is WindowState.STALE
        assert (
            reason_of(window, 50)
            == "capacity report is stale (at least configured maximum age 40s)"
        )

    def test_a_report_exactly_max_age_old_is_stale(self) -> None:
        window = record_reading(a_window(max_age="40s"), a_reading(2, observed=0), at(40))
        assert state(window, at(40)) is WindowState.STALE

    def test_a_report_from_the_future_fails_the_poll(self) -> None:
        window = polled(a_window(quorum=1), 3)
        window = record_reading(window, a_reading(2, observed=11), at(10))
        assert window.readings == ()
        assert state(window, at(10)) is WindowState.FAILED
        assert reason_of(window, 10) == "capacity report timestamp is in the future"

    def test_a_report_observed_at_the_poll_moment_counts(self) -> None:
        window = record_reading(a_window(quorum=1), a_reading(2, observed=10), at(10))
        assert ceiling_of(window, 10) == 2

    def test_successes_after_a_stale_report_await_quorum(self) -> None:
        window = record_reading(a_window(quorum=2, max_age="30s"), a_reading(2, observed=0), at(35))
        window = polled(window, 2, start=40)
        assert reason_of(window, 40) == "capacity report awaiting quorum (1/2 accepted samples)"


class TestExpiryBetweenPolls:
    def test_readings_that_reach_max_age_drop_out_and_the_reason_says_so(self) -> None:
        """samples 4, quorum 3, maxAge 40s; a frozen reporter keeps answering observedAt 0."""
        window = a_window(samples=4, quorum=3, max_age="40s")
        window = polled(window, 2, 2, 2, start=0, period=10)
        assert ceiling_of(window, 39) == 2
        assert (
            reason_of(window, 40)
            == "capacity report awaiting quorum after stale samples expired (2/3 accepted samples)"
        )
        assert (
            reason_of(window, 50)
            == "capacity report awaiting quorum after stale samples expired (1/3 accepted samples)"
        )
        assert (
            reason_of(window, 60)
            == "capacity report is stale (at least configured maximum age 40s)"
        )

    def test_when_every_reading_has_expired_the_reason_is_the_stale_one(self) -> None:
        """OME: once every sample has expired, the stale text, never `(0/q ...)`."""
        window = polled(a_window(samples=4, quorum=2, max_age="30s"), 2, start=0)
        assert state(window, at(30)) is WindowState.STALE
        assert verdict(window, at(30)) == Verdict(
            None, "capacity report is stale (at least configured maximum age 30s)"
        )

    def test_a_usable_window_whose_readings_all_expire_together_turns_stale(self) -> None:
        """A frozen reporter: the same observedAt on every poll, so all expire at once."""
        window = a_window(samples=4, quorum=2, max_age="30s")
        for poll in range(3):
            window = record_reading(window, a_reading(3, observed=0), at(5 * poll))
        assert verdict(window, at(29)) == Verdict(3, None)
        assert (
            reason_of(window, 30)
            == "capacity report is stale (at least configured maximum age 30s)"
        )

    def test_next_change_is_the_moment_the_ceiling_can_go(self) -> None:
        window = polled(a_window(samples=4, quorum=3, max_age="40s"), 2, 2, 2)
        assert next_change(window, at(20)) == at(40)
        assert next_change(window, at(40)) == at(50)
        assert next_change(window, at(50)) == at(60)
        assert next_change(window, at(60)) is None

    def test_the_verdict_holds_until_next_change(self) -> None:
        window = polled(a_window(samples=4, quorum=2, max_age="40s"), 5, 1, 3, 2)
        now = at(30)
        moment = next_change(window, now)
        assert moment is not None
        assert verdict(window, moment - timedelta(microseconds=1)) == verdict(window, now)
        assert verdict(window, moment) != verdict(window, now)

    def test_a_reading_above_the_ceiling_can_expire_without_a_change(self) -> None:
        """Readings 9 (t=0), 1, 1 with quorum 2: the 9 ageing out changes nothing."""
        window = polled(a_window(samples=4, quorum=2, max_age="40s"), 9, 1, 1)
        assert next_change(window, at(20)) == at(50)
        assert ceiling_of(window, 45) == 1

    def test_a_steady_reporter_changes_nothing_when_its_oldest_reading_ages_out(self) -> None:
        """Readings 4, 4, 4 with quorum 2 and maxAge 30s: the first ageing out (at 30s,
        before the next poll) leaves two 4s, so no change comes until the second ages out."""
        window = polled(a_window(samples=3, quorum=2, max_age="30s"), 4, 4, 4)
        assert next_change(window, at(20)) == at(40)
        assert ceiling_of(window, 35) == 4
        recorded, judged, change = record_and_judge(
            polled(a_window(samples=3, quorum=2, max_age="30s"), 4, 4), a_reading(4, 20), at(20)
        )
        assert (recorded, judged, change) == (window, Verdict(4, None), at(40))

    def test_a_reading_at_the_ceiling_ageing_out_changes_it_when_fewer_than_quorum_remain(
        self,
    ) -> None:
        """Readings 2 (t=0), 2, 2, 9 with quorum 2: ceiling 2 until the second 2 ages out."""
        window = polled(a_window(samples=4, quorum=2, max_age="40s"), 2, 2, 2, 9)
        assert next_change(window, at(30)) == at(50)
        assert ceiling_of(window, 49) == 2
        assert ceiling_of(window, 50) == 9

    def test_a_usable_window_changes_when_too_few_readings_remain(self) -> None:
        """Readings 1 (t=0), 9, 9 with quorum 3 and maxAge 40s: ceiling 9 until the 1 expires."""
        window = polled(a_window(samples=4, quorum=3, max_age="40s"), 1, 9, 9)
        assert next_change(window, at(20)) == at(40)

    def test_next_change_while_awaiting_quorum_is_the_first_expiry(self) -> None:
        window = polled(a_window(quorum=3, max_age="30s"), 4, start=5)
        assert next_change(window, at(5)) == at(35)

    @pytest.mark.parametrize(
        "make",
        [
            lambda: a_window(),
            lambda: record_failure(polled(a_window(), 1), "capacity endpoint returned HTTP 404"),
            lambda: record_reading(a_window(max_age="30s"), a_reading(1, observed=0), at(31)),
        ],
        ids=["no report", "failed", "stale"],
    )
    def test_an_empty_window_has_no_next_change(self, make: object) -> None:
        window = make()  # type: ignore[operator]
        assert next_change(window, at(100)) is None

    def test_expired_readings_are_dropped_at_the_next_poll(self) -> None:
        window = polled(a_window(samples=4, quorum=3, max_age="40s"), 2, 2, 2)
        window = polled(window, 2, start=55)
        assert [reading.observed_at for reading in window.readings] == [at(20), at(55)]

    def test_a_successful_poll_below_quorum_says_awaiting_quorum(self) -> None:
        """OME: the `after stale samples expired` text lasts only until the next poll."""
        window = polled(a_window(samples=4, quorum=3, max_age="40s"), 2, 2, 2)
        assert reason_of(window, 45) == expired_reason(2, 3)
        window = polled(window, 2, start=55)
        assert state(window, at(55)) is WindowState.AWAITING_QUORUM
        assert reason_of(window, 55) == "capacity report awaiting quorum (2/3 accepted samples)"

    def test_a_poll_after_every_reading_expired_awaits_quorum(self) -> None:
        window = polled(a_window(samples=4, quorum=2, max_age="15s"), 2, 2, start=0, period=10)
        assert (
            reason_of(window, 29)
            == "capacity report is stale (at least configured maximum age 15s)"
        )
        window = polled(window, 3, start=30)  # both older readings aged out
        assert reason_of(window, 30) == "capacity report awaiting quorum (1/2 accepted samples)"
        window = polled(window, 3, start=40)
        assert verdict(window, at(40)) == Verdict(3, None)

    def test_expiry_after_a_poll_below_quorum_says_so_again(self) -> None:
        """Readings 0s and 20s, then a poll at 35s; the 20s one expires at 50s."""
        window = polled(a_window(samples=4, quorum=3, max_age="30s"), 2, 2, start=0, period=20)
        window = polled(window, 2, start=35)
        assert reason_of(window, 49) == awaiting_quorum_reason(2, 3)
        assert reason_of(window, 50) == expired_reason(1, 3)
        assert (
            reason_of(window, 65)
            == "capacity report is stale (at least configured maximum age 30s)"
        )

    def test_a_failure_ends_the_expired_state(self) -> None:
        window = polled(a_window(quorum=2, max_age="15s"), 2, 2)
        window = polled(window, 3, start=30)
        window = record_failure(window, "capacity endpoint returned HTTP 500")
        assert reason_of(window, 30) == "capacity endpoint returned HTTP 500"
        window = polled(window, 3, start=40)
        assert reason_of(window, 40) == "capacity report awaiting quorum (1/2 accepted samples)"

    def test_a_ceiling_rises_when_a_low_reading_expires(self) -> None:
        window = polled(a_window(samples=5, quorum=1, max_age="30s"), 1, 4, 4)
        assert ceiling_of(window, 29) == 1
        assert next_change(window, at(29)) == at(30)
        assert ceiling_of(window, 30) == 4

    def test_a_max_age_finer_than_a_microsecond_rounds_up_for_expiry(self) -> None:
        window = polled(a_window(quorum=1, max_age="1.0000005s"), 3)
        assert next_change(window, at(0)) == T0 + timedelta(microseconds=1_000_001)
        assert ceiling_of(window, 1.0) == 3


class TestNamedStates:
    """Each state has exactly one fallback reason; only usable has a ceiling."""

    def test_a_new_window_has_no_report_yet(self) -> None:
        window = a_window()
        assert state(window, T0) is WindowState.NO_REPORT
        assert verdict(window, T0) == Verdict(None, "no capacity report yet")

    @pytest.mark.parametrize(
        ("build", "when", "expected_state", "reason"),
        [
            (lambda: a_window(quorum=3), 0, WindowState.NO_REPORT, "no capacity report yet"),
            (
                lambda: polled(a_window(quorum=3, max_age="40s"), 1),
                0,
                WindowState.AWAITING_QUORUM,
                "capacity report awaiting quorum (1/3 accepted samples)",
            ),
            (
                lambda: polled(a_window(quorum=3, max_age="40s"), 1, 1, 1),
                20,
                WindowState.USABLE,
                None,
            ),
            (
                lambda: record_reading(a_window(quorum=3, max_age="40s"), a_reading(1, 0), at(45)),
                45,
                WindowState.STALE,
                "capacity report is stale (at least configured maximum age 40s)",
            ),
            (
                lambda: polled(a_window(samples=4, quorum=3, max_age="40s"), 1, 1, 1),
                40,
                WindowState.EXPIRED,
                "capacity report awaiting quorum after stale samples expired (2/3 accepted samples)",
            ),
            (
                lambda: polled(a_window(samples=4, quorum=3, max_age="40s"), 1, 1, 1),
                60,
                WindowState.STALE,
                "capacity report is stale (at least configured maximum age 40s)",
            ),
            (
                lambda: record_failure(a_window(quorum=3), "capacity endpoint returned HTTP 404"),
                0,
                WindowState.FAILED,
                "capacity endpoint returned HTTP 404",
            ),
            (
                lambda: record_reading(a_window(quorum=3), a_reading(1, 5), at(0)),
                0,
                WindowState.FAILED,
                "capacity report timestamp is in the future",
            ),
        ],
        ids=[
            "no report",
            "awaiting quorum",
            "usable",
            "stale",
            "expired",
            "all expired",
            "failed",
            "future",
        ],
    )
    def test_each_state_shows_its_spec_reason(
        self, build: object, when: float, expected_state: WindowState, reason: str | None
    ) -> None:
        window = build()  # type: ignore[operator]
        assert state(window, at(when)) is expected_state
        assert reason_of(window, when) == reason

    def test_every_state_has_its_one_reason(self) -> None:
        window = record_failure(
            a_window(quorum=3, max_age="40s"), "capacity endpoint returned HTTP 404"
        )
        assert {each: fallback_reason(each, window, 1) for each in WindowState} == {
            WindowState.NO_REPORT: "no capacity report yet",
            WindowState.AWAITING_QUORUM: "capacity report awaiting quorum (1/3 accepted samples)",
            WindowState.USABLE: None,
            WindowState.STALE: "capacity report is stale (at least configured maximum age 40s)",
            WindowState.EXPIRED: "capacity report awaiting quorum after stale samples expired (1/3 accepted samples)",
            WindowState.FAILED: "capacity endpoint returned HTTP 404",
        }

    def test_reason_helpers_are_the_spec_text(self) -> None:
        assert NO_REPORT_YET == "no capacity report yet"
        assert (
            awaiting_quorum_reason(1, 3) == "capacity report awaiting quorum (1/3 accepted samples)"
        )
        assert (
            expired_reason(2, 3)
            == "capacity report awaiting quorum after stale samples expired (2/3 accepted samples)"
        )


class TestSettings:
    @pytest.mark.parametrize(
        ("samples", "quorum", "max_age", "message"),
        [
            (0, 1, "30s", r"samples \(0\) must be at least 1"),
            (3, 0, "30s", r"quorum \(0\) must be at least 1 and at most samples \(3\)"),
            (3, 4, "30s", r"quorum \(4\) must be at least 1 and at most samples \(3\)"),
            (3, 2, "0s", r"maxAge \(0s\) must be positive"),
            (3, 2, "-1s", r"maxAge \(-1s\) must be positive"),
        ],
    )
    def test_refuses_settings_the_window_cannot_use(
        self, samples: int, quorum: int, max_age: str, message: str
    ) -> None:
        with pytest.raises(ValueError, match=message):
            WindowSettings(samples=samples, quorum=quorum, max_age=Duration.parse(max_age))

    def test_windows_are_immutable_values(self) -> None:
        window = empty_window(settings())
        after = record_reading(window, Reading(1, T0), T0)
        assert window.readings == ()
        assert after.readings == (Reading(1, T0),)
        with pytest.raises(AttributeError):
            after.readings = ()  # type: ignore[misc]
