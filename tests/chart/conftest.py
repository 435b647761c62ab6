"""Fixtures for the chart tests: the real helm, and the chart rendered with given values.

- `helm` (session): the helm binary of the local control plane's tools.
- `promtool` (session): Prometheus' promtool, built once (`ome-routing dev tools` builds it).
- `render(*values)` (dicts or files): `helm template` of charts/ome-resources as release
  `ome-routing` in namespace `ome`; returns the documents, parsed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import Render, template

from ome_routing_dev.devcluster import ensure_tools
from ome_routing_dev.devcluster.promtool import ensure_promtool

CHART_DIR = Path(__file__).parent


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fetch helm (and build promtool, for the tests that use it) before any test runs, so
    that a first download or build is not cut by a test timeout."""
    items = [item for item in session.items if CHART_DIR in Path(str(item.path)).parents]
    if session.config.option.collectonly or not items:
        return
    ensure_tools(progress=lambda message: print(f"[dev tools] {message}", file=sys.stderr))
    if any("promtool" in getattr(item, "fixturenames", ()) for item in items):
        ensure_promtool(progress=lambda message: print(f"[dev tools] {message}", file=sys.stderr))


@pytest.fixture(scope="session")
def helm() -> Path:
    return ensure_tools().helm


@pytest.fixture(scope="session")
def promtool() -> Path:
    return ensure_promtool()


@pytest.fixture
def render(helm: Path, tmp_path: Path) -> Render:
    def render_with(*values: dict[str, Any] | Path, namespace: str = "ome") -> list[dict[str, Any]]:
        args: list[str] = []
        for index, item in enumerate(values):
            path = item if isinstance(item, Path) else tmp_path / f"values-{index}.yaml"
            if not isinstance(item, Path):
                path.write_text(yaml.safe_dump(item))
            args += ["-f", str(path)]
        result = template(helm, *args, namespace=namespace)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return render_with
