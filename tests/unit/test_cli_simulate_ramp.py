"""`ome-routing simulate --max-increase-per-period`: the ramped weights beside the targets."""

from __future__ import annotations

import json
from typing import Any

from builders import poll_line
from click.testing import CliRunner, Result

from ome_routing.cli.main import main

RAMPED = ("targetWeight", "weight", "othersTargetWeight", "othersWeight", "periodsLeft")


def run(trace: str, *options: str) -> Result:
    return CliRunner().invoke(main, ["simulate", *options, "-"], input=trace)


def ramp_columns(result: Result) -> list[tuple[Any, ...]]:
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return [tuple(line[key] for key in RAMPED) for line in lines]


#: worker's reporter: 2, 2, then 0 twice (the ceiling drops at the 2nd), then 2 again
TRACE = "".join(
    poll_line(10 * i, servable) + "\n" for i, servable in enumerate([2, 2, 0, 0, 2, 2, 2, 2, 2])
)


def test_a_recovery_is_ramped_over_ceil_one_over_f_periods() -> None:
    """Ceiling 0 -> 2 (quorum 2) with f = 0.25 and 2 other replicas: 1:4, 1:2, 3:4, 1:1."""
    options = ("--admitted", "2", "--quorum", "2", "--max-increase-per-period", "0.25")
    assert ramp_columns(run(TRACE, *options)) == [
        (1, 1, 1, 1, 0),
        (1, 1, 1, 1, 0),
        (1, 1, 1, 1, 0),
        (0, 0, 1, 1, 0),  # a fall applies at once
        (0, 0, 1, 1, 0),
        (1, 1, 1, 4, 3),  # the ceiling is back: the first step
        (1, 1, 1, 2, 2),
        (1, 3, 1, 4, 1),
        (1, 1, 1, 1, 0),
    ]


def test_others_sets_the_rest_of_the_service() -> None:
    options = ("--admitted", "2", "--max-increase-per-period", "0.5", "--others", "6")
    assert ramp_columns(run(TRACE, *options))[5:7] == [(1, 1, 3, 6, 1), (1, 1, 3, 3, 0)]


def test_without_the_option_the_lines_are_as_before() -> None:
    result = run(TRACE, "--admitted", "2")
    assert result.exit_code == 0
    assert all(not set(RAMPED) & set(json.loads(line)) for line in result.stdout.splitlines())


def test_a_bad_fraction_is_a_usage_error_naming_it() -> None:
    result = run(TRACE, "--admitted", "2", "--max-increase-per-period", "1.5")
    assert result.exit_code == 2
    assert (
        '--max-increase-per-period ("1.5") must be a decimal fraction in (0, 1], such as "0.25"'
        in result.output
    )


def test_the_ramp_needs_admitted_and_others_needs_the_ramp() -> None:
    assert (
        "--max-increase-per-period (0.5) needs --admitted"
        in run(TRACE, "--max-increase-per-period", "0.5").output
    )
    assert (
        "--others (3) needs --max-increase-per-period"
        in run(TRACE, "--admitted", "2", "--others", "3").output
    )
