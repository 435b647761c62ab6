"""`ome-routing simulate --shadow`: the same trace through a shadow routing policy too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builders import poll_line
from click.testing import CliRunner, Result

from ome_routing.cli.main import main

SHADOW = """\
capacity:
  path: /capacity
  method: GET
  format: Report
  samples: 10
  quorum: 1
  period: 10s
  timeout: 3s
  maxAge: 30s
"""


def trace_of(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def run(tmp_path: Path, shadow: str, trace: str, *options: str) -> Result:
    path = tmp_path / "shadow.yaml"
    path.write_text(shadow)
    return CliRunner().invoke(main, ["simulate", "--shadow", str(path), *options, "-"], input=trace)


def lines_of(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


DROP = trace_of(
    poll_line(0, 4), poll_line(10, 4), poll_line(20, 1), poll_line(30, 1),
    poll_line(40, error="capacity endpoint returned HTTP 404"),
)  # fmt: skip


def test_both_timelines_are_printed_with_where_they_differ(tmp_path: Path) -> None:
    result = run(tmp_path, SHADOW, DROP, "--quorum", "2", "--admitted", "4")
    lines = lines_of(result)
    assert [(line["ceiling"], line["shadow"]["ceiling"]) for line in lines] == [
        (None, 4), (4, 4), (4, 1), (1, 1), (None, None),
    ]  # fmt: skip
    assert [line["differs"] for line in lines] == [True, False, True, False, False]
    assert lines[2]["shadow"] == {
        "ceiling": 1, "fallbackReason": None, "allocated": 1, "source": "Endpoint",
        "reported": 1, "routable": 1,
    }  # fmt: skip
    assert lines[4]["shadow"]["fallbackReason"] == "capacity endpoint returned HTTP 404"
    assert "shadow: differs at 2 of 5 poll(s), first at 2026-09-28T10:00:00Z" in result.stderr


def test_without_shadow_the_lines_are_as_before(tmp_path: Path) -> None:
    plain = CliRunner().invoke(main, ["simulate", "--quorum", "2", "-"], input=DROP)
    shadowed = run(tmp_path, SHADOW, DROP, "--quorum", "2")
    assert plain.exit_code == 0
    for before, after in zip(plain.stdout.splitlines(), lines_of(shadowed), strict=True):
        live = {k: v for k, v in after.items() if k not in ("shadow", "differs")}
        assert json.loads(before) == live


def test_a_shadow_samples_above_the_live_window_sees_only_what_live_keeps(tmp_path: Path) -> None:
    shadow = SHADOW.replace("quorum: 1", "quorum: 3")
    trace = trace_of(poll_line(0, 4), poll_line(10, 4), poll_line(20, 4))
    lines = lines_of(run(tmp_path, shadow, trace, "--samples", "2", "--quorum", "2"))
    assert lines[-1]["ceiling"] == 4
    assert lines[-1]["shadow"]["fallbackReason"] == (
        "capacity report awaiting quorum (2/3 accepted samples)"
    )


def test_a_bad_shadow_is_a_usage_error_naming_the_file_and_field(tmp_path: Path) -> None:
    result = run(tmp_path, SHADOW.replace("samples: 10", "samples: 0"), DROP)
    assert result.exit_code == 2
    path = tmp_path / "shadow.yaml"
    assert f"Error: --shadow {path}: validate routing policy: spec.routing.capacity." in (
        result.output
    )


def test_a_shadow_without_a_poll_has_nothing_to_replay(tmp_path: Path) -> None:
    result = run(tmp_path, "capacityFactors: {worker-a: '2'}\n", DROP)
    assert result.exit_code == 2
    assert "sets no capacity poll (capacity, with its path): nothing to replay" in result.output
