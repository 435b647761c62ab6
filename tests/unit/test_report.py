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

    @pytest.mark.parametrize("servable", [0, 1, 999_999_999, 1_000_000_000, (1 << 31) - 1])
    def test_reads_every_whole_number_from_zero_to_int32_max(self, servable: int) -> None:
        assert parse_report(report_body(servable)).servable == servable

    @pytest.mark.parametrize(
        "body",
        [
            b'{"Servable": 4, "ObservedAt": "2026-09-28T10:00:00Z"}',
            b'{"SERVABLE": 4, "observedat": "2026-09-28T10:00:00Z"}',
            b'{"serv\\u0061ble": 4, "observedAt": "2026-09-28T10:00:00Z"}',
            '{"\u017fervable": 4, "observedAt": "2026-09-28T10:00:00Z"}'.encode(),
        ],
        ids=["title case", "upper and lower", "escaped key", "long s folds to s"],
    )
    def test_keys_match_case_insensitively_as_go_does(self, body: bytes) -> None:
        assert parse_report(body) == Reading(4, T0)

    def test_an_exact_key_and_a_folded_one_are_the_same_field_and_the_last_wins(self) -> None:
        body = b'{"servable": 1, "Servable": 4, "observedAt": "2026-09-28T10:00:00Z"}'
        assert parse_report(body).servable == 4

    def test_ignores_bytes_that_are_not_utf8_inside_unknown_strings(self) -> None:
        """Go reads them as U+FFFD inside strings."""
        body = b'{"servable": 2, "observedAt": "2026-09-28T10:00:00Z", "note": "\xff"}'
        assert parse_report(body) == Reading(2, T0)

    def test_reads_negative_zero_as_zero(self) -> None:
        assert parse_report(b'{"servable": -0, "observedAt": "2026-09-28T10:00:00Z"}').servable == 0

    def test_reads_a_body_nested_deeper_than_python_reads_but_within_gos_limit(self) -> None:
        """Go reads 10,000 levels; the report is read, the deep member ignored."""
        deep = b"[" * 5_000 + b"]" * 5_000
        body = b'{"servable": 4, "extra": ' + deep + b', "observedAt": "2026-09-28T10:00:00Z"}'
        assert parse_report(body) == Reading(4, T0)

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
            (
                b'{"servable": 4, "observedAt": "0001-01-01T00:00:00Z"}',
                "capacity report has no observedAt stamp",
            ),
            (
                b'{"servable": 4, "observedAt": "0001-01-01T02:00:00+02:00"}',
                "capacity report has no observedAt stamp",
            ),
            (b"null", "capacity report has no servable count"),
            (
                b'{"servable": 4, "observedAt": "2026-09-28T10:00:00Z", "servable": null}',
                "capacity report has no servable count",
            ),
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
        assert reason_for(body) == INVALID + "unexpected end of JSON input"


FIELD = "into Go struct field CapacityReport.servable of type int32"


class TestInvalidReports:
    """Go's decoder: syntax first, then type errors, in Go's words after the prefix."""

    @pytest.mark.parametrize(
        ("servable", "shown"),
        [
            ("4.5", "number 4.5"),
            ("4.0", "number 4.0"),
            ("4e0", "number 4e0"),
            ("1e400", "number 1e400"),
            ("-1e400", "number -1e400"),
            ('"4"', "string"),
            ("true", "bool"),
            ("false", "bool"),
            ("[4]", "array"),
            ('{"n": 4}', "object"),
        ],
    )
    def test_servable_that_is_not_an_integer_is_a_type_error(
        self, servable: str, shown: str
    ) -> None:
        body = f'{{"servable": {servable}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        assert reason_for(body) == f"{INVALID}json: cannot unmarshal {shown} {FIELD}"

    @pytest.mark.parametrize(
        "servable",
        ["2147483648", "3000000000", "-2147483649", "9223372036854775808", "1" + "0" * 30],
    )
    def test_servable_beyond_int32_is_a_type_error(self, servable: str) -> None:
        body = f'{{"servable": {servable}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        assert reason_for(body) == f"{INVALID}json: cannot unmarshal number {servable} {FIELD}"

    def test_int32_min_is_read_and_is_negative(self) -> None:
        assert reason_for(report_body(-(1 << 31))) == "capacity report is negative (-2147483648)"

    def test_a_huge_number_is_refused_without_reading_all_its_digits(self) -> None:
        """Python's int() refuses over 4300 digits; the parser must not surface that."""
        digits = "7" * 60_000
        reason = reason_for(
            f'{{"servable": {digits}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        )
        assert reason == f"{INVALID}json: cannot unmarshal number {'7' * 64}... {FIELD}"

    def test_a_type_error_comes_before_a_missing_field(self) -> None:
        assert reason_for(b'{"servable": "4"}') == f"{INVALID}json: cannot unmarshal string {FIELD}"
        assert (
            reason_for(b'{"observedAt": 5}')
            == f"{INVALID}Time.UnmarshalJSON: input is not a JSON string"
        )

    def test_the_first_type_error_wins_even_when_a_later_value_is_good(self) -> None:
        body = b'{"servable": "x", "servable": 4, "observedAt": "2026-09-28T10:00:00Z"}'
        assert reason_for(body) == f"{INVALID}json: cannot unmarshal string {FIELD}"

    def test_a_bad_stamp_ends_decoding_ahead_of_an_earlier_type_error(self) -> None:
        """Go returns a time.Time's own error at once; type errors wait for the end."""
        body = b'{"servable": "4", "observedAt": ""}'
        assert reason_for(body) == (
            f'{INVALID}parsing time "" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006"'
        )

    @pytest.mark.parametrize(
        ("token", "detail"),
        [
            ("NaN", "invalid character 'N' looking for beginning of value"),
            ("Infinity", "invalid character 'I' looking for beginning of value"),
            ("-Infinity", "invalid character 'I' in numeric literal"),
        ],
    )
    def test_non_json_constants_are_syntax_errors(self, token: str, detail: str) -> None:
        body = f'{{"servable": {token}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode()
        assert reason_for(body) == INVALID + detail

    @pytest.mark.parametrize(
        ("body", "detail"),
        [
            (
                b"[1, 2]",
                "json: cannot unmarshal array into Go value of type routing.CapacityReport",
            ),
            (
                b'"report"',
                "json: cannot unmarshal string into Go value of type routing.CapacityReport",
            ),
            (b"4", "json: cannot unmarshal number into Go value of type routing.CapacityReport"),
            (b"4.5", "json: cannot unmarshal number into Go value of type routing.CapacityReport"),
            (b"true", "json: cannot unmarshal bool into Go value of type routing.CapacityReport"),
            (b"{", "unexpected end of JSON input"),
            (b'{"servable": 4, "observedAt": "2026', "unexpected end of JSON input"),
            (b"<html>404</html>", "invalid character '<' looking for beginning of value"),
            (
                b'{"servable": 4,}',
                "invalid character '}' looking for beginning of object key string",
            ),
            (b'{"servable": 4} x', "invalid character 'x' after top-level value"),
            (b'{"servable" 4}', "invalid character '4' after object key"),
            (b'{"servable": 4 "x": 1}', "invalid character '\"' after object key:value pair"),
            (b'{"a": [1 2]}', "invalid character '2' after array element"),
            (b'{"a": "\\q"}', "invalid character 'q' in string escape code"),
            (b'{"a": "\\u12x4"}', "invalid character 'x' in \\u hexadecimal character escape"),
            (b'{"a": "x\ny"}', "invalid character '\\n' in string literal"),
            (b"{\"a\": 'x'}", "invalid character '\\'' looking for beginning of value"),
            (b"\xff\xfe{}", "invalid character 'ÿ' looking for beginning of value"),
            (b"[" * 100_000, "invalid character '[' exceeded max depth"),
        ],
    )
    def test_a_body_that_is_not_a_report_object(self, body: bytes, detail: str) -> None:
        assert reason_for(body) == INVALID + detail

    @pytest.mark.parametrize(
        ("body", "detail"),
        [
            (b'{"servable": 4.', "invalid character ' ' after decimal point in numeric literal"),
            (b'{"servable": -', "invalid character ' ' in numeric literal"),
            (b'{"servable": 4, "x": tru', "invalid character ' ' in literal true (expecting 'e')"),
            (b'{"servable": 4} \xc3\xa9', "invalid character 'Ã' after top-level value"),
            (
                b'{"servable": 4, \x80: 1}',
                "invalid character '\\u0080' looking for beginning of object key string",
            ),
            (b"\xef\xbb\xbf{}", "invalid character 'ï' looking for beginning of value"),
            (b'{"servable": 4 \xff}', "invalid character 'ÿ' after object key:value pair"),
        ],
    )
    def test_every_syntax_error_is_gos_text(self, body: bytes, detail: str) -> None:
        """Where Python's json words an error its own way, Go's scanner gives Go's."""
        assert reason_for(body) == INVALID + detail

    @pytest.mark.parametrize(
        ("observed", "detail"),
        [
            ("4", "Time.UnmarshalJSON: input is not a JSON string"),
            ("true", "Time.UnmarshalJSON: input is not a JSON string"),
            ("[]", "Time.UnmarshalJSON: input is not a JSON string"),
            ("{}", "Time.UnmarshalJSON: input is not a JSON string"),
        ],
    )
    def test_an_observed_at_that_is_not_a_string(self, observed: str, detail: str) -> None:
        body = f'{{"servable": 4, "observedAt": {observed}}}'.encode()
        assert reason_for(body) == INVALID + detail

    LAYOUT = '"2006-01-02T15:04:05Z07:00"'

    @pytest.mark.parametrize(
        ("stamp", "tail"),
        [
            ("", ' as {layout}: cannot parse "" as "2006"'),
            ("2026-09-28t10:00:00z", ' as {layout}: cannot parse "t10:00:00z" as "T"'),
            ("2026-09-28T10:00:00z", ' as {layout}: cannot parse "z" as "Z07:00"'),
            ("2026-09-28T10:00:00", ' as {layout}: cannot parse "" as "Z07:00"'),
            ("2026-09-28 10:00:00Z", ' as {layout}: cannot parse " 10:00:00Z" as "T"'),
            ("2026-09-28", ' as {layout}: cannot parse "" as "T"'),
            ("1759053600", ' as {layout}: cannot parse "053600" as "-"'),
            ("2026-09-28T10:00:00+0200", ' as {layout}: cannot parse "+0200" as "Z07:00"'),
            ("2026-09-28T10:00:00.Z", ' as {layout}: cannot parse ".Z" as "Z07:00"'),
            ("2026-09-28T1:00:00Z", ' as {layout}: cannot parse "1" as "15"'),
            ("2026-09-28T10:00:00,5Z", ' as {layout}: cannot parse "," as "."'),
            ("2026-09-28T10:00:00Zjunk", ': extra text: "junk"'),
            ("2026-09-28T10:00:00+24:00", ": timezone hour out of range"),
            ("2026-09-28T10:00:00+01:60", ": timezone minute out of range"),
            ("2026-09-28T10:00:00+25:00", ": time zone offset hour out of range"),
            ("2026-02-30T10:00:00Z", ": day out of range"),
            ("2026-13-01T10:00:00Z", ": month out of range"),
            ("2026-09-28T24:00:00Z", ": hour out of range"),
            ("2026-09-28T10:00:60Z", ": second out of range"),
        ],
    )
    def test_an_observed_at_go_does_not_read_as_rfc3339(self, stamp: str, tail: str) -> None:
        body = f'{{"servable": 4, "observedAt": "{stamp}"}}'.encode()
        expected = f'{INVALID}parsing time "{stamp}"' + tail.format(layout=self.LAYOUT)
        assert reason_for(body) == expected

    def test_an_escaped_stamp_is_read_raw_as_go_reads_it(self) -> None:
        """Go hands time.Time the raw bytes: `\\u005a` is not a `Z` to it."""
        reason = reason_for(b'{"servable": 4, "observedAt": "2026-09-28T10:00:00\\u005a"}')
        assert reason.startswith(f'{INVALID}parsing time "2026-09-28T10:00:00\\\\u005a" as ')

    def test_a_long_stamp_is_cut_short(self) -> None:
        reason = reason_for(report_body(4, "x" * 10_000))
        assert reason.startswith(f'{INVALID}parsing time "xxxx')
        assert reason.endswith("...")
        assert len(reason) < 400

    def test_a_stamp_before_year_one_is_read_and_is_ancient(self) -> None:
        reading = parse_report(report_body(4, "0000-06-01T00:00:00Z"))
        assert reading.observed_at == datetime.min.replace(tzinfo=UTC)
        assert freshness_failure(reading, T0, Duration.parse("40s")) == stale_reason(
            Duration.parse("40s")
        )


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
