"""The Lease's timing in the chart: OME's values, passed to the controller as a set or not at all.

The rendered arguments are handed to the real `ome-routing controller`, which judges them
before anything else (OME's messages); no API server is needed for that.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import DEPLOYMENT, Render, find, template

from ome_routing.core.durations import parse_duration
from ome_routing.kube.leader import ElectionSettings

FLAGS = (
    "--leader-elect-lease-duration",
    "--leader-elect-renew-deadline",
    "--leader-elect-retry-period",
)


def timing_args(docs: list[dict[str, Any]]) -> list[str]:
    container = find(docs, "Deployment", DEPLOYMENT)["spec"]["template"]["spec"]["containers"][0]
    return [a for a in container["args"] if a.startswith(FLAGS)]


def timing(**values: Any) -> dict[str, Any]:
    return {"controller": {"leaderElection": values}}


def start_controller(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The controller with these arguments and a config file that is not there."""
    command = [sys.executable, "-m", "ome_routing.cli.main", "controller", *args]
    command += ["--config", str(tmp_path / "absent.yaml")]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_by_default_the_chart_passes_omes_timings(render: Render, tmp_path: Path) -> None:
    args = timing_args(render())
    assert args == [
        "--leader-elect-lease-duration=60s",
        "--leader-elect-renew-deadline=40s",
        "--leader-elect-retry-period=8s",
    ]
    settings = ElectionSettings.from_flags(*(parse_duration(a.split("=")[1]) for a in args))
    assert settings == ElectionSettings(60.0, 40.0, 8.0)
    # the controller accepts them and goes on to read its config
    result = start_controller(args, tmp_path)
    assert result.returncode == 1
    assert "Invalid leader election timing" not in result.stderr
    assert "read operator config" in result.stderr


def test_changed_values_reach_the_controller(render: Render) -> None:
    docs = render(timing(leaseDuration="90s", renewDeadline="1m", retryPeriod="12s"))
    assert timing_args(docs) == [
        "--leader-elect-lease-duration=90s",
        "--leader-elect-renew-deadline=1m",
        "--leader-elect-retry-period=12s",
    ]


def test_without_the_block_no_timing_is_passed(render: Render) -> None:
    assert timing_args(render({"controller": {"leaderElection": None}})) == []
    nulls = timing(leaseDuration=None, renewDeadline=None, retryPeriod=None)
    assert timing_args(render(nulls)) == []


def test_a_partial_set_reaches_the_controller_which_refuses_to_start(
    render: Render, tmp_path: Path
) -> None:
    args = timing_args(render(timing(renewDeadline=None)))
    assert args == [
        "--leader-elect-lease-duration=60s",
        "--leader-elect-renew-deadline=0s",
        "--leader-elect-retry-period=8s",
    ]
    result = start_controller(args, tmp_path)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "Invalid leader election timing" in errors[0]
    assert (
        "leader election timings are supplied as a set: "
        "got lease-duration=1m0s renew-deadline=0s retry-period=8s"
    ) in errors[0]


def test_a_renew_deadline_without_room_for_a_retry_stops_the_controller(
    render: Render, tmp_path: Path
) -> None:
    args = timing_args(render(timing(leaseDuration="60s", renewDeadline="9s", retryPeriod="8s")))
    result = start_controller(args, tmp_path)
    assert result.returncode == 1
    assert (
        "leader election renew-deadline (9s) must exceed retry-period jittered by 1.2x (9.6s), "
        "otherwise a window holds no complete attempt"
    ) in result.stderr


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("controller.leaderElection.leaseDurationSeconds=60", "leaseDurationSeconds"),
        ("controller.leaderElection.retryPeriod=true", "retryPeriod"),
    ],
)
def test_a_misspelled_or_mistyped_value_is_refused_by_the_schema(
    helm: Path, setting: str, field: str
) -> None:
    result = template(helm, "--set", setting)
    assert result.returncode != 0
    assert "schema" in result.stderr or field in result.stderr
    assert field in result.stderr
