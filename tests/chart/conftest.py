"""Fixtures for the chart tests: the real helm, and the chart rendered with given values.

- `helm` (session): the helm binary of the local control plane's tools.
- `render(*values)` (dicts or files): `helm template` of charts/ome-resources as release
  `ome` in namespace `ome`; returns the documents, parsed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import Render, template

from ome_routing.devcluster import ensure_tools

CHART_DIR = Path(__file__).parent


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fetch helm before any test runs, so a first download is not cut by a test timeout."""
    if session.config.option.collectonly or not any(
        CHART_DIR in Path(str(item.path)).parents for item in session.items
    ):
        return
    ensure_tools(progress=lambda message: print(f"[dev tools] {message}", file=sys.stderr))


@pytest.fixture(scope="session")
def helm() -> Path:
    return ensure_tools().helm


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
