"""Helpers of the chart tests: run the real helm, pick rendered documents."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ome-resources"

#: The release the chart tests render, as docs/install.md installs it: its full name is
#: the release's, and every namespaced name derives from it.
RELEASE = "ome-routing"
DEPLOYMENT = RELEASE
CONFIGMAP = f"{RELEASE}-config"

#: `render(*values)`: the chart's documents for these values (dicts or files).
Render = Callable[..., list[dict[str, Any]]]


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=60, check=False
    )


def template(helm: Path, *args: str, namespace: str = "ome") -> subprocess.CompletedProcess[str]:
    return run_helm(helm, "template", RELEASE, str(CHART), "--namespace", namespace, *args)


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"{len(matches)} {kind} {name or ''} rendered"
    return matches[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)
