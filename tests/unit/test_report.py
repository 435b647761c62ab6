"""The Report format: parsing a reporter's answer, and judging a reading's freshness."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from builders import T0, at, report_body

from ome_routing.core.durations import Duration
from ome_routing.core.report import (
    FUTURE,
    NO_OBSERVED_AT,
    NO_SERVABLE,
    Reading,
    ReportError,
    format_rfc3339,
    freshness_failure,
    negative_reason,
    parse_report,
    parse_rfc3339,
    stale_reason,
)

INVALID = "capacity response is not a valid report: "


def reason_for(body: bytes) -> str:
    with pytest.raises(ReportError) as caught:
        parse_report(body)
    assert str(caught.value) == caught.value.reason
    return caught.value.reason


class TestValidReports:
    def test_reads_the_spec_example(self) -> None:
        reading = parse_report(b'{"servable": 4, "observedAt": "2026-09-28T10:00:00Z"}')
        assert reading == Reading(servable=4, observed_at=T0)

    @pytest.mark.parametrize(
        ("stamp", "expected"),
        [
            ("2026-09-28T12:00:00+02:00", T0),
            ("2026-09-28T05:30:00-04:30", T0),
            ("2026-09-28T10:00:00+00:00", T0),
            ("2026-09-28T10:00:00.5Z", T0 + timedelta(milliseconds=500)),
            ("2026-09-28T10:00:00.123456Z", T0 + timedelta(microseconds=123456)),
            ("2026-09-28T10:00:00.123456789Z", T0 + timedelta(microseconds=123456)),
            ("2026-09-28t10:00:00z", T0),
        ],
    )
    def test_reads_rfc3339_variants(self, stamp: str, expected: datetime) -> None:
        assert parse_report(report_body(3, stamp)).observed_at == expected

    def test_keeps_the_reporters_offset(self) -> None:
        observed = parse_report(report_body(3, "2026-09-28T12:00:00+02:00")).observed_at
        assert observed.utcoffset() == timedelta(hours=2)

    def test_ignores_extra_fields(self) -> None:
        body = (
            b'{"servable": 2, "observedAt": "2026-09-28T10:00:00Z", "pairs": [1, 2], "note": null}'
        )
        assert parse_report(body) == Reading(2, T0)

    @pytest.mark.parametrize("servable", [0, 1, (1 << 63) - 1])
    def test_reads_every_whole_number_from_zero_to_int64_max(self, servable: int) -> None:
        assert parse_report(report_body(servable)).servable == servable

    def test_reads_negative_zero_as_zero(self) -> None:
        assert parse_report(b'{"servable": -0, "observedAt": "2026-09-28T10:00:00Z"}').servable == 0

    def test_tolerates_surrounding_whitespace(self) -> None:
        assert (
            parse_report(b'\n  {"servable": 1, "observedAt": "2026-09-28T10:00:00Z"}\r\n').servable
            == 1
        )


class TestSpecFallbackReasons:
    """The report rows of the spec's fallbackReason table, verbatim."""

    @pytest.mark.parametrize(
        ("body", "reason"),
        [
            (b'{"observedAt": "2026-09-28T10:00:00Z"}', "capacity report has no servable count"),
            (
                b'{"servable": null, "observedAt": "2026-09-28T10:00:00Z"}',
                "capacity report has no servable count",
            ),
            (b'{"servable": 4}', "capacity report has no observedAt stamp"),
            (b'{"servable": 4, "observedAt": null}', "capacity report has no observedAt stamp"),
            (b'{"servable": 4, "observedAt": ""}', "capacity report has no observedAt stamp"),
            (
                b'{"servable": -1, "observedAt": "2026-09-28T10:00:00Z"}',
                "capacity report is negative (-1)",
            ),
            (b"{}", "capacity report has no servable count"),
        ],
    )
    def test_missing_or_negative_fields_give_the_spec_reason(
        self, body: bytes, reason: str
    ) -> None:
        assert reason_for(body) == reason

    def test_reason_constants_are_the_spec_text(self) -> None:
        assert NO_SERVABLE == "capacity report has no servable count"
        assert NO_OBSERVED_AT == "capacity report has no observedAt stamp"
        assert negative_reason(-1) == "capacity report is negative (-1)"
        assert FUTURE == "capacity report timestamp is in the future"
        assert (
            stale_reason(Duration.parse("40s"))
            == "capacity report is stale (at least configured maximum age 40s)"
        )

    def test_a_negative_count_is_not_read_as_zero(self) -> None:
        assert reason_for(report_body(-7)) == "capacity report is negative (-7)"

    @pytest.mark.parametrize("body", [b"", b"   ", b"\n"])
    def test_an_empty_body_as_with_head_is_not_a_valid_report(self, body: bytes) -> None:
        assert reason_for(body) == INVALID + "empty body"


class TestInvalidReports:
    @pytest.mark.parametrize(
        ("servable", "shown"),
        [
            ("4.5", "4.5"),
            ("4.0", "4.0"),
            ("4e0", "4e0"),
            ("1e400", "1e400"),
            ("-1e400", "-1e400"),
            ('"4"', '"4"'),
            ("true", "true"),
            ("false", "false"),
            ("[4]", "array"),
            ('{"n": 4}', "object"),
        ],
    )
    def test_servable_that_is_not_a_whole_number(self, servable: str, shown: str) -> None:
        body = f'{{"servable": {servable}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        assert reason_for(body) == f"{INVALID}servable must be a whole number, got {shown}"

    @pytest.mark.parametrize(
        "servable",
        ["9223372036854775808", "-9223372036854775809", "1" + "0" * 30, "-" + "9" * 40],
    )
    def test_servable_beyond_int64_is_out_of_range(self, servable: str) -> None:
        body = f'{{"servable": {servable}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        assert reason_for(body) == f"{INVALID}servable {servable} is out of range"

    def test_a_huge_number_is_refused_without_reading_all_its_digits(self) -> None:
        """Python's int() refuses over 4300 digits; the parser must not surface that."""
        digits = "7" * 60_000
        reason = reason_for(
            f'{{"servable": {digits}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        )
        assert reason.startswith(f"{INVALID}servable 7777")
        assert reason.endswith("... is out of range")
        assert len(reason) < 200

    def test_a_long_string_is_shown_cut_short(self) -> None:
        reason = reason_for(report_body("x" * 10_000))
        assert reason == f'{INVALID}servable must be a whole number, got "{"x" * 64}..."'

    @pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
    def test_non_json_constants_are_refused(self, token: str) -> None:
        body = f'{{"servable": {token}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        assert reason_for(body) == f"{INVALID}{token} is not a JSON value"

    @pytest.mark.parametrize(
        ("body", "detail"),
        [
            (b"[1, 2]", "expected a JSON object, got array"),
            (b'"report"', "expected a JSON object, got string"),
            (b"4", "expected a JSON object, got number"),
            (b"4.5", "expected a JSON object, got number"),
            (b"null", "expected a JSON object, got null"),
            (b"true", "expected a JSON object, got boolean"),
            (b"<html>404</html>", "Expecting value at line 1 column 1"),
            (
                b'{"servable": 4,}',
                "Expecting property name enclosed in double quotes at line 1 column 16",
            ),
            (b'{"servable": 4} x', "Extra data at line 1 column 17"),
            (b"\xff\xfe{}", "body is not UTF-8 text"),
            (
                b'{"servable": 4, "observedAt": "2026-09-28T10:00:00Z\xc3"}',
                "body is not UTF-8 text",
            ),
            (b"[" * 100_000, "JSON nested too deeply"),
        ],
    )
    def test_a_body_that_is_not_a_json_object(self, body: bytes, detail: str) -> None:
        assert reason_for(body) == INVALID + detail

    @pytest.mark.parametrize(
        ("observed", "detail"),
        [
            ("4", "observedAt must be an RFC 3339 string, got number"),
            ("true", "observedAt must be an RFC 3339 string, got boolean"),
            ("[]", "observedAt must be an RFC 3339 string, got array"),
            ("{}", "observedAt must be an RFC 3339 string, got object"),
            (
                '"2026-09-28T10:00:00"',
                'observedAt "2026-09-28T10:00:00" is not an RFC 3339 time with a time zone',
            ),
            (
                '"2026-09-28 10:00:00Z"',
                'observedAt "2026-09-28 10:00:00Z" is not an RFC 3339 time with a time zone',
            ),
            ('"2026-09-28"', 'observedAt "2026-09-28" is not an RFC 3339 time with a time zone'),
            ('"1759053600"', 'observedAt "1759053600" is not an RFC 3339 time with a time zone'),
            (
                '"2026-09-28T10:00:00+0200"',
                'observedAt "2026-09-28T10:00:00+0200" is not an RFC 3339 time with a time zone',
            ),
            (
                '"2026-09-28T10:00:00.Z"',
                'observedAt "2026-09-28T10:00:00.Z" is not an RFC 3339 time with a time zone',
            ),
            (
                '"2026-09-28T10:00:00+24:00"',
                'observedAt "2026-09-28T10:00:00+24:00" has a time zone offset out of range',
            ),
            (
                '"2026-09-28T10:00:00+01:60"',
                'observedAt "2026-09-28T10:00:00+01:60" has a time zone offset out of range',
            ),
            (
                '"2026-02-30T10:00:00Z"',
                'observedAt "2026-02-30T10:00:00Z" is not a valid time: day is out of range for month',
            ),
            (
                '"2026-09-28T25:00:00Z"',
                'observedAt "2026-09-28T25:00:00Z" is not a valid time: hour must be in 0..23',
            ),
            (
                '"2026-09-28T10:00:60Z"',
                'observedAt "2026-09-28T10:00:60Z" is not a valid time: second must be in 0..59',
            ),
            (
                '"2026-09-28T10:00:00\\u0661Z"',
                'observedAt "2026-09-28T10:00:00\\u0661Z" is not an RFC 3339 time with a time zone',
            ),
        ],
    )
    def test_an_observed_at_that_is_not_rfc3339_with_a_zone(
        self, observed: str, detail: str
    ) -> None:
        body = f'{{"servable": 4, "observedAt": {observed}}}'.encode()
        assert reason_for(body) == INVALID + detail

    def test_quotes_use_double_quotes_as_go_does(self) -> None:
        reason = reason_for(report_body(4, "yesterday's"))
        assert '"yesterday\'s"' in reason

    def test_missing_servable_is_reported_before_a_bad_stamp(self) -> None:
        assert reason_for(b'{"observedAt": "nope"}') == NO_SERVABLE


class TestTimestamps:
    def test_parse_rfc3339_gives_an_aware_time(self) -> None:
        moment = parse_rfc3339("2026-09-28T10:00:00-07:00")
        assert moment.tzinfo == timezone(timedelta(hours=-7))
        assert moment == datetime(2026, 9, 28, 17, 0, tzinfo=UTC)

    @pytest.mark.parametrize(
        ("moment", "text"),
        [
            (T0, "2026-09-28T10:00:00Z"),
            (T0 + timedelta(milliseconds=250), "2026-09-28T10:00:00.25Z"),
            (T0 + timedelta(microseconds=1), "2026-09-28T10:00:00.000001Z"),
            (
                datetime(2026, 9, 28, 12, tzinfo=timezone(timedelta(hours=2))),
                "2026-09-28T10:00:00Z",
            ),
            (datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "0999-01-02T03:04:05Z"),
        ],
    )
    def test_format_rfc3339_prints_utc(self, moment: datetime, text: str) -> None:
        assert format_rfc3339(moment) == text
        assert parse_rfc3339(text) == moment


class TestFreshness:
    MAX_AGE = Duration.parse("40s")

    @pytest.mark.parametrize("age", [0.0, 0.000001, 1.0, 39.999999])
    def test_a_reading_younger_than_max_age_counts(self, age: float) -> None:
        assert freshness_failure(Reading(1, T0), at(age), self.MAX_AGE) is None

    @pytest.mark.parametrize("age", [40.0, 40.000001, 3600.0])
    def test_a_reading_that_reached_max_age_is_stale(self, age: float) -> None:
        reason = freshness_failure(Reading(1, T0), at(age), self.MAX_AGE)
        assert reason == "capacity report is stale (at least configured maximum age 40s)"

    @pytest.mark.parametrize("ahead", [0.000001, 1.0, 86400.0])
    def test_a_reading_from_the_future_fails(self, ahead: float) -> None:
        reason = freshness_failure(Reading(1, at(ahead)), T0, self.MAX_AGE)
        assert reason == "capacity report timestamp is in the future"

    def test_offsets_do_not_change_the_age(self) -> None:
        reading = parse_report(report_body(1, "2026-09-28T12:00:00+02:00"))
        assert freshness_failure(reading, at(39), self.MAX_AGE) is None
        assert freshness_failure(reading, at(40), self.MAX_AGE) is not None

    def test_a_max_age_with_nanoseconds_is_compared_exactly(self) -> None:
        """1.0000005s: an age of 1.000000s is fresh, 1.000001s has reached it."""
        max_age = Duration.parse("1.0000005s")
        assert freshness_failure(Reading(1, T0), at(1.0), max_age) is None
        assert (
            freshness_failure(Reading(1, T0), T0 + timedelta(microseconds=1_000_001), max_age)
            is not None
        )

    def test_age_is_now_minus_observed_at(self) -> None:
        assert Reading(1, T0).age(at(12)) == timedelta(seconds=12)
