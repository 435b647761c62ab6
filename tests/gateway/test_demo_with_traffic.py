"""`ome-routing demo --traffic`, run for real: Step 3 as before, then real requests split 2:1, then 1:1."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OME_ROUTING = Path(sys.executable).parent / "ome-routing"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")

pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def demo_run() -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(OME_ROUTING), "demo", "--traffic"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    result.stdout = ANSI_ESCAPE.sub("", result.stdout)
    return result


def block(lines: list[str]) -> str:
    return "\n".join(lines)


def test_every_output_still_matches_the_specification(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    assert demo_run.returncode == 0, demo_run.stdout + demo_run.stderr
    assert demo_run.stdout.count("OK: matches the specification") == 5
    assert "worker-a 2 2 2 ControlPlane 3\nworker-b 1 1 2 Endpoint 1" in demo_run.stdout


def test_requests_through_the_gateway_split_by_the_weights_then_follow_the_change(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    two_to_one = block(
        [
            "HOME        SERVED   SHARE   WEIGHT",
            "worker-a       200   66.7%   2 of 3",
            "worker-b       100   33.3%   1 of 3",
        ]
    )
    one_to_one = block(
        [
            "HOME        SERVED   SHARE   WEIGHT",
            "worker-a       150   50.0%   1 of 2",
            "worker-b       150   50.0%   1 of 2",
        ]
    )
    out = demo_run.stdout
    assert two_to_one in out and one_to_one in out, out
    assert out.index(two_to_one) < out.index("Lower worker-a's count to 1") < out.index(one_to_one)
    assert out.count("OK: 300 requests split exactly as the weights say") == 2
