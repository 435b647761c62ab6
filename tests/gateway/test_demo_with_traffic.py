"""`ome-routing demo --traffic [--gateway contour]`, run for real: Step 3 as before, then real
requests split 2:1, then 1:1: exactly through Traefik, within the binomial test's bounds
through Envoy (OME's default ExternalName backends)."""

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


@pytest.fixture(scope="module", params=["traefik", "contour"])
def demo_run(request: pytest.FixtureRequest) -> tuple[str, subprocess.CompletedProcess[str]]:
    gateway = request.param
    flags = [] if gateway == "traefik" else ["--gateway", gateway]
    result = subprocess.run(
        [str(OME_ROUTING), "demo", "--traffic", *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    result.stdout = ANSI_ESCAPE.sub("", result.stdout)
    return gateway, result


def block(lines: list[str]) -> str:
    return "\n".join(lines)


def test_every_output_still_matches_the_specification(
    demo_run: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    _, run = demo_run
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("OK: matches the specification") == 5
    assert "worker-a 2 2 2 ControlPlane 3\nworker-b 1 1 2 Endpoint 1" in run.stdout


def test_requests_through_the_gateway_split_by_the_weights_then_follow_the_change(
    demo_run: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    gateway, run = demo_run
    out = run.stdout
    if gateway == "traefik":
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
        assert two_to_one in out and one_to_one in out, out
        first, second = out.index(two_to_one), out.index(one_to_one)
        assert out.count("OK: 300 requests split exactly as the weights say") == 2
    else:
        tables = [
            {m[0]: (int(m[1]), m[2]) for m in re.findall(r"^(worker-[ab]) +(\d+) .* (\d of \d)$", t, re.M)}
            for t in out.split("HOME        SERVED   SHARE   WEIGHT")[1:]
        ]  # fmt: skip
        assert [{c: w for c, (_, w) in t.items()} for t in tables] == [
            {"worker-a": "2 of 3", "worker-b": "1 of 3"},
            {"worker-a": "1 of 2", "worker-b": "1 of 2"},
        ], out
        assert [sum(n for n, _ in t.values()) for t in tables] == [300, 300]
        assert 159 <= tables[0]["worker-a"][0] <= 238, out
        assert "ExternalName" in out and "tmb-" in out
        assert "hostnameEndpointSlices" not in out
        assert out.count("OK: 300 requests split as the weights say (binomial test)") == 2
        first = out.index("HOME        SERVED")
        second = out.index("HOME        SERVED", first + 1)
    assert first < out.index("Lower worker-a's count to 1") < second
