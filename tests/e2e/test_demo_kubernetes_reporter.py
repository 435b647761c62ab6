"""`ome-routing demo --kubernetes-reporter`: the homes' counts come from Pod objects."""

from __future__ import annotations

import subprocess

from test_demo import ANSI_ESCAPE, OME_ROUTING, REPO

from ome_routing_dev.devcluster import Tools


def test_the_demo_matches_the_specification_with_counts_from_pods(tools: Tools) -> None:
    result = subprocess.run(
        [str(OME_ROUTING), "demo", "--kubernetes-reporter"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = ANSI_ESCAPE.sub("", result.stdout)
    assert result.returncode == 0, out + result.stderr
    assert "counts the Ready pods of worker-a/qwen3-0-6b: 3" in out
    assert "counts the Ready pods of worker-b/qwen3-0-6b: 1" in out
    assert "worker-b 1 1 2 Endpoint 1" in out.splitlines()
    assert "Every output matches the specification." in out
