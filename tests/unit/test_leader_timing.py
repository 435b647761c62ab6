"""`--leader-elect-lease-duration`, `-renew-deadline` and `-retry-period`: OME's rules and
messages (`pkg/leaderelection/timing.go`), durations printed as Go prints them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ome_routing.core.durations import Duration, parse_duration
from ome_routing.kube.leader import ElectionSettings, timing_problem


def check(lease: str, renew: str, retry: str) -> str | None:
    return timing_problem(parse_duration(lease), parse_duration(renew), parse_duration(retry))


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [
        ("0", "0", "0"),  # unset: the defaults
        ("60s", "40s", "8s"),  # the chart's
        ("15s", "10s", "2s"),  # controller-runtime's
        ("1m30s", "1m", "12s"),
    ],
)
def test_a_consistent_set_or_none_is_accepted(lease: str, renew: str, retry: str) -> None:
    assert check(lease, renew, retry) is None


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "message"),
    [
        (
            "0",
            "40s",
            "0",
            "leader election timings are supplied as a set: "
            "got lease-duration=0s renew-deadline=40s retry-period=0s",
        ),
        (
            "1m",
            "40s",
            "0",
            "leader election timings are supplied as a set: "
            "got lease-duration=1m0s renew-deadline=40s retry-period=0s",
        ),
        (
            "60s",
            "40s",
            "-8s",
            "leader election timings must be positive: "
            "got lease-duration=1m0s renew-deadline=40s retry-period=-8s",
        ),
        (
            "15s",
            "40s",
            "8s",
            "leader election lease-duration (15s) must exceed renew-deadline (40s), "
            "otherwise the lease expires while its holder is still renewing",
        ),
        (
            "40s",
            "40s",
            "8s",
            "leader election lease-duration (40s) must exceed renew-deadline (40s), "
            "otherwise the lease expires while its holder is still renewing",
        ),
        (
            "60s",
            "9s",
            "8s",
            "leader election renew-deadline (9s) must exceed retry-period jittered by 1.2x "
            "(9.6s), otherwise a window holds no complete attempt",
        ),
        (
            "60s",
            "2.4s",
            "2s",
            "leader election renew-deadline (2.4s) must exceed retry-period jittered by 1.2x "
            "(2.4s), otherwise a window holds no complete attempt",
        ),
        (
            "1s",
            "900ms",
            "750ms",
            "leader election renew-deadline (900ms) must exceed retry-period jittered by 1.2x "
            "(900ms), otherwise a window holds no complete attempt",
        ),
    ],
)
def test_omes_messages(lease: str, renew: str, retry: str, message: str) -> None:
    assert check(lease, renew, retry) == message


def test_the_flags_give_the_settings_or_the_defaults() -> None:
    assert ElectionSettings.from_flags(None, None, None) == ElectionSettings(15.0, 10.0, 2.0)
    given = ElectionSettings.from_flags(
        parse_duration("1m"), parse_duration("40s"), parse_duration("8s")
    )
    assert given == ElectionSettings(60.0, 40.0, 8.0)
    with pytest.raises(ValueError, match="supplied as a set"):
        ElectionSettings.from_flags(Duration(0), parse_duration("40s"), None)


def controller(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ome_routing.cli.main", "controller", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_the_controller_refuses_a_partial_set_at_start() -> None:
    """Before it reads any config or reaches the API server: one line, exit code 1."""
    result = controller("--config", "/nonexistent/values.yaml", "--leader-elect-renew-deadline=40s")
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(lines) == 1, result.stderr
    assert "Invalid leader election timing" in lines[0]
    assert (
        "leader election timings are supplied as a set: "
        "got lease-duration=0s renew-deadline=40s retry-period=0s"
    ) in lines[0]


def test_a_duration_without_a_unit_is_refused_by_the_flag() -> None:
    result = controller("--leader-elect-lease-duration=60")
    assert result.returncode == 2
    assert "--leader-elect-lease-duration" in result.stderr
