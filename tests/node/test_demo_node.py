"""`ome-routing demo --node`: the demo with both charts installed by helm on a node of its
own, checked against the specification, leaving the host as it found it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from host_state import HostState

REPO = Path(__file__).resolve().parents[2]


def test_demo_on_a_node_matches_the_specification_and_leaves_nothing_behind(
    node: object,  # the session's image is built, and a second node runs beside it
) -> None:
    before = HostState.now(Path("ome-routing-demo-node-"))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ome-routing"), "demo", "--node"],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "Every output matches the specification." in result.stdout
    assert result.stdout.count("OK: matches the specification") == 5
    assert HostState.now(Path("ome-routing-demo-node-")) == before
