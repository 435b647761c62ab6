"""Go-compatible durations: parsing and printing as Go's time.Duration."""

from __future__ import annotations

import pickle
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.durations import (
    HOUR,
    MAX_NANOSECONDS,
    MICROSECOND,
    MILLISECOND,
    MIN_NANOSECONDS,
    MINUTE,
    SECOND,
    Duration,
    DurationError,
    format_duration,
    go_quote,
    parse_duration,
)


class TestParse:
    @pytest.mark.parametrize(
        ("text", "nanoseconds"),
        [
            ("0", 0),
            ("+0", 0),
            ("-0", 0),
            ("0s", 0),
            ("500ms", 500 * MILLISECOND),
            ("10s", 10 * SECOND),
            ("1m30s", 90 * SECOND),
            ("1.5s", 1500 * MILLISECOND),
            ("2h45m", 2 * HOUR + 45 * MINUTE),
            ("1µs", MICROSECOND),  # micro sign
            ("1μs", MICROSECOND),  # Greek mu
            ("1us", MICROSECOND),
            ("10ns", 10),
            ("1.000000001s", SECOND + 1),
            ("-5s", -5 * SECOND),
            ("+5s", 5 * SECOND),
            ("5.s", 5 * SECOND),
            (".5s", 500 * MILLISECOND),
            ("1.004s", 1004 * MILLISECOND),
            ("100.00100s", 100 * SECOND + MILLISECOND),
            ("10.5s4m", 4 * MINUTE + 10500 * MILLISECOND),
            ("-2m3.4s", -(2 * MINUTE + 3400 * MILLISECOND)),
            (
                "1h2m3s4ms5us6ns",
                HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6,
            ),
            ("1.9999999999s", SECOND + 999_999_999),  # fractions truncate
            # Go scales fractions in float64; exact arithmetic would give 1ns less
            ("0.3333333333333333333h", 20 * MINUTE),
            ("0.100000000000000000000h", 6 * MINUTE),
            ("0.830103483285477580700h", 49 * MINUTE + 48 * SECOND + 372_539_827),
            ("9007199254740993ns", 9007199254740993),
            ("9223372036854775807ns", MAX_NANOSECONDS),
            ("9223372036854775.807us", MAX_NANOSECONDS),
            ("9223372036s854ms775us807ns", MAX_NANOSECONDS),
            ("-9223372036s854ms775us808ns", MIN_NANOSECONDS),
            ("-9223372036854775808ns", MIN_NANOSECONDS),
            ("-2562047h47m16.854775808s", MIN_NANOSECONDS),
        ],
    )
    def test_reads_go_duration_text(self, text: str, nanoseconds: int) -> None:
        assert parse_duration(text) == Duration(nanoseconds)
        assert Duration.parse(text).nanoseconds == nanoseconds

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("10", 'missing unit in duration "10"'),
            ("00", 'missing unit in duration "00"'),
            ("1s5", 'missing unit in duration "1s5"'),
            ("", 'invalid duration ""'),
            ("+", 'invalid duration "+"'),
            ("-", 'invalid duration "-"'),
            ("s", 'invalid duration "s"'),
            (".", 'invalid duration "."'),
            ("-.", 'invalid duration "-."'),
            (".s", 'invalid duration ".s"'),
            ("+.s", 'invalid duration "+.s"'),
            (" 1s", 'invalid duration " 1s"'),
            ("1x", 'unknown unit "x" in duration "1x"'),
            ("1d", 'unknown unit "d" in duration "1d"'),
            ("1S", 'unknown unit "S" in duration "1S"'),
            ("1s ", 'unknown unit "s " in duration "1s "'),
            ("1s-1s", 'unknown unit "s-" in duration "1s-1s"'),
            ("\u0661s", 'invalid duration "\\xd9\\xa1s"'),  # only ASCII digits are digits
            ("\x85\x85", 'invalid duration "\\xc2\\x85\\xc2\\x85"'),
            ('1"s', 'unknown unit "\\"s" in duration "1\\"s"'),
            ("9223372036854775808ns", 'invalid duration "9223372036854775808ns"'),
            ("9223372036854775.808us", 'invalid duration "9223372036854775.808us"'),
            ("9223372036854ms775us808ns", 'invalid duration "9223372036854ms775us808ns"'),
            ("-9223372036854775809ns", 'invalid duration "-9223372036854775809ns"'),
            ("99999999999999999999ns", 'invalid duration "99999999999999999999ns"'),
            ("2562048h", 'invalid duration "2562048h"'),
            ("9223372037s", 'invalid duration "9223372037s"'),
        ],
    )
    def test_refuses_what_go_refuses_with_gos_message(self, text: str, message: str) -> None:
        with pytest.raises(DurationError) as caught:
            parse_duration(text)
        assert str(caught.value) == message

    def test_duration_error_is_a_value_error(self) -> None:
        with pytest.raises(ValueError, match="missing unit"):
            Duration.parse("3")


class TestFormat:
    @pytest.mark.parametrize(
        ("nanoseconds", "text"),
        [
            (0, "0s"),
            (1, "1ns"),
            (1100, "1.1µs"),
            (MICROSECOND, "1µs"),
            (2200 * MICROSECOND, "2.2ms"),
            (500 * MILLISECOND, "500ms"),
            (10 * SECOND, "10s"),
            (90 * SECOND, "1m30s"),
            (1500 * MILLISECOND, "1.5s"),
            (SECOND + 1, "1.000000001s"),
            (2 * HOUR + 45 * MINUTE, "2h45m0s"),
            (HOUR, "1h0m0s"),
            (-5 * SECOND, "-5s"),
            (-1, "-1ns"),
            (MAX_NANOSECONDS, "2562047h47m16.854775807s"),
            (MIN_NANOSECONDS, "-2562047h47m16.854775808s"),
        ],
    )
    def test_prints_as_go_does(self, nanoseconds: int, text: str) -> None:
        assert format_duration(nanoseconds) == text
        assert str(Duration(nanoseconds)) == text

    @pytest.mark.parametrize(
        ("text", "printed"),
        [("2h45m", "2h45m0s"), ("90s", "1m30s"), ("0.5s", "500ms"), ("1000ms", "1s")],
    )
    def test_parse_then_print_gives_gos_canonical_text(self, text: str, printed: str) -> None:
        assert str(Duration.parse(text)) == printed

    @given(st.integers(min_value=MIN_NANOSECONDS, max_value=MAX_NANOSECONDS))
    @settings(max_examples=300)
    def test_printed_text_parses_back_to_the_same_nanoseconds(self, nanoseconds: int) -> None:
        assert parse_duration(format_duration(nanoseconds)).nanoseconds == nanoseconds

    @given(
        st.lists(
            st.tuples(
                st.integers(min_value=0, max_value=10_000),
                st.sampled_from(["ns", "us", "µs", "ms", "s", "m", "h"]),
            ),
            min_size=1,
            max_size=4,
        )
    )
    @settings(max_examples=200)
    def test_whole_number_parts_add_up(self, parts: list[tuple[int, str]]) -> None:
        scale = {
            "ns": 1,
            "us": MICROSECOND,
            "µs": MICROSECOND,
            "ms": MILLISECOND,
            "s": SECOND,
            "m": MINUTE,
            "h": HOUR,
        }
        text = "".join(f"{value}{unit}" for value, unit in parts)
        assert parse_duration(text).nanoseconds == sum(value * scale[unit] for value, unit in parts)


class TestArithmeticAndConversions:
    def test_orders_by_length(self) -> None:
        assert Duration.parse("500ms") < Duration.parse("1s") <= Duration.parse("1s")
        assert Duration.parse("1m") > Duration.parse("59s")
        assert max(Duration.parse("2s"), Duration.parse("90s")) == Duration.parse("1m30s")

    def test_multiplies_by_a_count(self) -> None:
        assert Duration.parse("10s") * 3 == Duration.parse("30s")
        assert 3 * Duration.parse("10s") == Duration.parse("30s")

    def test_seconds_and_of_seconds_agree(self) -> None:
        assert Duration.of_seconds(1.5) == Duration.parse("1.5s")
        assert Duration.parse("250ms").seconds == 0.25

    @given(st.integers(min_value=MIN_NANOSECONDS, max_value=MAX_NANOSECONDS))
    @settings(max_examples=100)
    def test_seconds_follow_the_nanoseconds_and_take_no_part_in_comparisons(
        self, nanoseconds: int
    ) -> None:
        duration = Duration(nanoseconds)
        assert duration.seconds == nanoseconds / SECOND
        assert replace(duration, nanoseconds=nanoseconds * 2).seconds == nanoseconds * 2 / SECOND
        assert pickle.loads(pickle.dumps(duration)).seconds == duration.seconds
        twin = Duration(nanoseconds)
        assert twin == duration and hash(twin) == hash(duration)
        assert repr(duration) == f"Duration(nanoseconds={nanoseconds})"

    @pytest.mark.parametrize(
        ("nanoseconds", "truncated", "ceiling"),
        [
            (0, 0, 0),
            (1, 0, 1),
            (999, 0, 1),
            (1000, 1, 1),
            (1_000_001, 1000, 1001),
            (-1, 0, 0),
            (-1001, -1, -1),
        ],
    )
    def test_timedeltas_truncate_toward_zero_or_round_up(
        self, nanoseconds: int, truncated: int, ceiling: int
    ) -> None:
        assert Duration(nanoseconds).as_timedelta() == timedelta(microseconds=truncated)
        assert Duration(nanoseconds).ceil_timedelta() == timedelta(microseconds=ceiling)


class TestGoQuote:
    @pytest.mark.parametrize(
        ("text", "quoted"),
        [
            ("10", '"10"'),
            ("", '""'),
            ('a"b', '"a\\"b"'),
            ("a\\b", '"a\\\\b"'),
            ("µ", '"\\xc2\\xb5"'),
            ("\n", '"\\x0a"'),
        ],
    )
    def test_quotes_as_gos_time_package(self, text: str, quoted: str) -> None:
        assert go_quote(text) == quoted
