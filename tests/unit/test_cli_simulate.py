"""`ome-routing simulate`: replaying a poll trace through the capacity window."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import at, poll_line, settings
from click.testing import CliRunner, Result

from ome_routing.cli.main import main
from ome_routing.cli.simulate import (
    Poll,
    TraceError,
    format_step,
    read_trace,
    simulate,
    simulate_polls,
)

BINARY = Path(sys.executable).parent / "ome-routing"


def run(trace: str, *options: str) -> Result:
    return CliRunner().invoke(main, ["simulate", *options, "-"], input=trace)


def outputs(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def trace_of(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def notes(result: Result) -> str:
    """stderr without the convergence lines that every run prints first."""
    kept = [line for line in result.stderr.splitlines(True) if not line.startswith("convergence: ")]
    return "".join(kept)


class TestReplay:
    def test_one_low_reading_cannot_set_the_ceiling_alone(self) -> None:
        trace = trace_of(poll_line(0, 4), poll_line(10, 1), poll_line(20, 4))
        lines = outputs(run(trace, "--quorum", "2", "--admitted", "3"))
        assert lines == [
            {
                "at": "2026-09-28T10:00:00Z",
                "ceiling": None,
                "fallbackReason": "capacity report awaiting quorum (1/2 accepted samples)",
                "allocated": 3,
                "source": "ControlPlane",
                "reported": None,
                "routable": 3,
            },
            {
                "at": "2026-09-28T10:00:10Z",
                "ceiling": 4,
                "fallbackReason": None,
                "allocated": 3,
                "source": "ControlPlane",
                "reported": 4,
                "routable": 3,
            },
            {
                "at": "2026-09-28T10:00:20Z",
                "ceiling": 4,
                "fallbackReason": None,
                "allocated": 3,
                "source": "ControlPlane",
                "reported": 4,
                "routable": 3,
            },
        ]

    def test_two_low_readings_lower_allocated_and_source_is_endpoint(self) -> None:
        trace = trace_of(poll_line(0, 1), poll_line(10, 4), poll_line(20, 1))
        last = outputs(run(trace, "--quorum", "2", "--admitted", "3"))[-1]
        assert (last["ceiling"], last["allocated"], last["source"], last["reported"]) == (
            1,
            1,
            "Endpoint",
            1,
        )

    def test_a_failed_poll_passes_its_reason_through_and_falls_back_to_admitted(self) -> None:
        trace = trace_of(
            poll_line(0, 1),
            poll_line(10, 1),
            poll_line(20, error="capacity endpoint returned HTTP 404"),
        )
        lines = outputs(run(trace, "--admitted", "2"))
        assert lines[1]["allocated"] == 1
        assert lines[2]["fallbackReason"] == "capacity endpoint returned HTTP 404"
        assert (lines[2]["ceiling"], lines[2]["allocated"], lines[2]["reported"]) == (None, 2, None)

    @pytest.mark.parametrize(
        ("line", "reason"),
        [
            (poll_line(0, -1), "capacity report is negative (-1)"),
            (
                poll_line(0, 4.5),
                "capacity response is not a valid report: json: cannot unmarshal number 4.5"
                " into Go struct field CapacityReport.servable of type int32",
            ),
            (
                poll_line(0, "4"),
                "capacity response is not a valid report: json: cannot unmarshal string"
                " into Go struct field CapacityReport.servable of type int32",
            ),
            (poll_line(0, None), "capacity report has no servable count"),
            (
                '{"at": "2026-09-28T10:00:00Z", "servable": 2}',
                "capacity report has no observedAt stamp",
            ),
            (
                '{"at": "2026-09-28T10:00:00Z", "servable": 2, "observedAt": "2026-09-28T10:00:00"}',
                'capacity response is not a valid report: parsing time "2026-09-28T10:00:00" as '
                '"2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"',
            ),
            (
                poll_line(0, 2, observed=-40),
                "capacity report is stale (at least configured maximum age 40s)",
            ),
            (poll_line(0, 2, observed=1), "capacity report timestamp is in the future"),
        ],
    )
    def test_reports_go_through_the_production_parser(self, line: str, reason: str) -> None:
        (only,) = outputs(run(trace_of(line), "--max-age", "40s", "--admitted", "2"))
        assert only["fallbackReason"] == reason
        assert only["allocated"] == 2

    def test_readings_expire_between_polls(self) -> None:
        """A frozen reporter keeps answering observedAt 0: the ceiling goes once readings age out."""
        trace = trace_of(*(poll_line(10 * n, 1, observed=0) for n in range(5)))
        options = (
            "--samples",
            "4",
            "--quorum",
            "3",
            "--period",
            "10s",
            "--max-age",
            "40s",
            "--admitted",
            "2",
        )
        reasons = [line["fallbackReason"] for line in outputs(run(trace, *options))]
        assert reasons == [
            "capacity report awaiting quorum (1/3 accepted samples)",
            "capacity report awaiting quorum (2/3 accepted samples)",
            None,
            None,
            "capacity report is stale (at least configured maximum age 40s)",
        ]

    def test_ready_caps_routable(self) -> None:
        trace = trace_of(poll_line(0, 5), poll_line(10, 5))
        last = outputs(run(trace, "--admitted", "4", "--ready", "2"))[-1]
        assert (last["allocated"], last["routable"]) == (4, 2)

    def test_blank_lines_are_skipped_and_offsets_are_printed_in_utc(self) -> None:
        line = '{"at": "2026-09-28T12:00:00+02:00", "error": "capacity endpoint returned HTTP 500"}'
        (only,) = outputs(run("\n" + line + "\n\n", "--admitted", "1"))
        assert only["at"] == "2026-09-28T10:00:00Z"

    def test_reads_a_trace_file_by_path(self, tmp_path: Path) -> None:
        path = tmp_path / "trace.jsonl"
        path.write_text(trace_of(poll_line(0, 2), poll_line(10, 2)))
        result = CliRunner().invoke(main, ["simulate", "--admitted", "3", str(path)])
        assert [line["ceiling"] for line in outputs(result)] == [None, 2]

    def test_an_empty_trace_prints_nothing(self) -> None:
        assert outputs(run("", "--admitted", "1")) == []


class TestOptions:
    @pytest.mark.parametrize(
        ("options", "message"),
        [
            (
                ("--period", "10"),
                """Invalid value for '--period': "10" is not a duration (use forms like "30s", "5m")""",
            ),
            (
                ("--max-age", "1d"),
                """Invalid value for '--max-age': "1d" is not a duration (use forms like "30s", "5m")""",
            ),
            (("--samples", "0"), "Invalid value for '--samples': 0 is not in the range x>=1"),
            (("--quorum", "0"), "Invalid value for '--quorum': 0 is not in the range x>=1"),
            (("--admitted", "-1"), "Invalid value for '--admitted': -1 is not in the range x>=0"),
            (("--samples", "two"), "Invalid value for '--samples': 'two' is not a valid integer"),
            (("--samples", "2", "--quorum", "3"), "--quorum (3) must not exceed --samples (2)"),
            (("--period", "0s"), "--period (0s) must be positive"),
            (("--max-age", "-30s"), "--max-age (-30s) must be positive"),
            (
                ("--quorum", "3", "--period", "10s", "--max-age", "20s"),
                "--max-age (20s) must span at least --quorum (3) --period intervals (30s)",
            ),
        ],
    )
    def test_bad_options_name_the_option_and_the_value(
        self, options: tuple[str, ...], message: str
    ) -> None:
        result = run("", "--admitted", "1", *options)
        assert result.exit_code == 2
        assert message in result.stderr

    def test_ready_needs_admitted(self) -> None:
        result = run("", "--ready", "2")
        assert result.exit_code == 2
        assert "--ready (2) needs --admitted" in result.stderr


class TestWithoutAdmitted:
    def test_each_line_is_the_windows_verdict_and_no_allocation(self) -> None:
        trace = trace_of(
            poll_line(0, 4),
            poll_line(10, 1),
            poll_line(20, error="capacity endpoint returned HTTP 404"),
        )
        assert outputs(run(trace, "--quorum", "2")) == [
            {
                "at": "2026-09-28T10:00:00Z",
                "ceiling": None,
                "fallbackReason": "capacity report awaiting quorum (1/2 accepted samples)",
            },
            {"at": "2026-09-28T10:00:10Z", "ceiling": 4, "fallbackReason": None},
            {
                "at": "2026-09-28T10:00:20Z",
                "ceiling": None,
                "fallbackReason": "capacity endpoint returned HTTP 404",
            },
        ]

    def test_simulate_polls_without_admitted_gives_verdicts_alone(self) -> None:
        polls = [Poll(1, at(0), b'{"servable": 3, "observedAt": "2026-09-28T10:00:00Z"}', None)]
        (step,) = simulate_polls(polls, settings(quorum=1))
        assert (step.verdict.ceiling, step.allocation, step.routable) == (3, None, None)


class TestConvergenceBounds:
    def test_the_bounds_go_to_stderr_one_line_each(self) -> None:
        result = run(
            trace_of(poll_line(0, 4)),
            *("--samples", "4", "--quorum", "3", "--period", "10s", "--max-age", "40s"),
        )
        assert len(outputs(result)) == 1
        assert result.stderr.splitlines() == [
            "convergence: a drop in the count applies at the 3rd poll that reads it (quorum 3): "
            "30s at period 10s",
            "convergence: a rise in the count applies by the 2nd poll that reads it "
            "(samples 4, minus quorum 3, plus 1): 20s at period 10s",
            "convergence: a frozen reporter loses the ceiling within maxAge (40s) of its last "
            "observedAt",
            "convergence: a failed poll keeps the admitted replicas for at least quorum (3) "
            "polls: 30s at period 10s",
        ]

    def test_bad_settings_print_no_bounds(self) -> None:
        result = run("", "--quorum", "3", "--max-age", "20s")
        assert result.exit_code == 2
        assert "convergence:" not in result.stderr

    @pytest.mark.parametrize(
        ("options", "warning"),
        [
            (
                ("--period", "500ms", "--max-age", "2s"),
                "--period (500ms) is under the chart's default routing.observer.minPeriod (1s)",
            ),
            (
                ("--samples", "200"),
                "--samples (200) exceeds the chart's default routing.observer.maxSamples (100)",
            ),
        ],
    )
    def test_settings_beyond_the_charts_default_limits_warn(
        self, options: tuple[str, ...], warning: str
    ) -> None:
        result = run("", "--admitted", "1", *options)
        assert result.exit_code == 0
        assert f"warning: {warning}" in result.stderr

    def test_a_gap_longer_than_the_period_warns(self) -> None:
        trace = trace_of(poll_line(0, 2), poll_line(10, 2), poll_line(35.5, 2))
        result = run(trace, "--admitted", "1", "--period", "10s")
        assert len(outputs(result)) == 3
        assert notes(result) == (
            "warning: line 3: 25.5s since the previous poll, longer than --period (10s): "
            "the controller would have polled in between\n"
        )

    def test_a_gap_of_exactly_the_period_is_quiet(self) -> None:
        result = run(
            trace_of(poll_line(0, 2), poll_line(10, 2)), "--admitted", "1", "--period", "10s"
        )
        assert notes(result) == ""


class TestBadTraceLines:
    @pytest.mark.parametrize(
        ("line", "problem"),
        [
            (
                "{not json",
                "not JSON: Expecting property name enclosed in double quotes at column 2",
            ),
            ("[1, 2]", "a poll must be a JSON object"),
            (
                '{"servable": 1, "observedAt": "2026-09-28T10:00:00Z"}',
                '"at" is required, as an RFC 3339 time with a time zone',
            ),
            ('{"at": 5, "error": "x"}', '"at" is required, as an RFC 3339 time with a time zone'),
            (
                '{"at": "2026-09-28T10:00:00", "error": "x"}',
                '"at": parsing time "2026-09-28T10:00:00" as "2006-01-02T15:04:05Z07:00": '
                'cannot parse "" as "Z07:00"',
            ),
            (
                '{"at": "2026-09-28T10:00:00Z"}',
                'a poll needs "servable" and "observedAt", or "error"',
            ),
            (
                '{"at": "2026-09-28T10:00:00Z", "error": "x", "servable": 1}',
                'a poll has either "error" or "servable" and "observedAt", not both',
            ),
            (
                '{"at": "2026-09-28T10:00:00Z", "error": ""}',
                '"error" must be a non-empty string, the failed poll\'s reason',
            ),
            (
                '{"at": "2026-09-28T10:00:00Z", "error": 404}',
                '"error" must be a non-empty string, the failed poll\'s reason',
            ),
            (
                '{"at": "2026-09-28T10:00:00Z", "servabel": 1}',
                'unknown field "servabel" (known: at, error, observedAt, servable)',
            ),
        ],
    )
    def test_a_bad_line_is_an_error_naming_its_number(self, line: str, problem: str) -> None:
        result = run(trace_of(poll_line(0, 2), "", line), "--admitted", "1")
        assert result.exit_code == 1
        assert result.stdout == ""
        assert result.stderr == f"Error: <stdin>: line 3: {problem}\n"

    def test_polls_must_be_in_time_order(self) -> None:
        result = run(trace_of(poll_line(10, 2), poll_line(10, 2)), "--admitted", "1")
        assert result.exit_code == 1
        assert result.stderr == (
            'Error: <stdin>: line 2: "2026-09-28T10:00:10Z" is not after the previous poll at "2026-09-28T10:00:10Z"\n'
        )

    def test_a_line_that_is_not_utf8(self) -> None:
        with pytest.raises(TraceError, match=r"^line 1: not UTF-8 text$"):
            read_trace([b'{"at": "\xff"}'])

    def test_a_huge_number_in_a_trace_line_is_handed_to_the_parser(self) -> None:
        line = (
            '{"at": "2026-09-28T10:00:00Z", "servable": '
            + "9" * 5000
            + ', "observedAt": "2026-09-28T10:00:00Z"}'
        )
        (only,) = outputs(run(trace_of(line), "--admitted", "1"))
        assert only["fallbackReason"] == (
            f"capacity response is not a valid report: json: cannot unmarshal number {'9' * 64}..."
            " into Go struct field CapacityReport.servable of type int32"
        )


class TestPureParts:
    def test_simulate_polls_starts_from_an_empty_window(self) -> None:
        polls = [Poll(1, at(0), b'{"servable": 0, "observedAt": "2026-09-28T10:00:00Z"}', None)]
        (step,) = simulate_polls(polls, settings(quorum=1), admitted=2, ready=2)
        assert step.allocation is not None
        assert (step.verdict.ceiling, step.allocation.allocated, step.routable) == (0, 0, 0)
        assert json.loads(format_step(step))["source"] == "Endpoint"

    def test_the_command_is_the_one_main_maps(self) -> None:
        assert main.get_command(None, "simulate") is simulate  # type: ignore[arg-type]


@pytest.mark.skipif(not BINARY.exists(), reason="needs the installed console script")
def test_the_installed_command_replays_a_trace_from_stdin() -> None:
    trace = trace_of(poll_line(0, 1), poll_line(10, 4), poll_line(20, 1))
    done = subprocess.run(
        [str(BINARY), "simulate", "--quorum", "2", "--admitted", "3", "-"],
        input=trace,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["ceiling"] for line in done.stdout.splitlines()] == [None, 4, 1]
