"""`pip install .` of the product pulls what the product runs and nothing of its development
kit: the metadata of the product's wheel, built offline by its own build backend (what pip
runs for `pip install .` and `pip wheel .`, the image's build), from a copy of what the build
reads."""

from __future__ import annotations

import shutil
import subprocess
import sys
from email.parser import HeaderParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

RUNTIME = [
    "aiohttp>=3.10",
    "httptools>=0.9",
    "lightkube<1.1,>=1.0.1",
    "prometheus-client<0.27,>=0.26",
    "httpx2<3,>=2.16.2",
    "click>=8.1",
    "rich>=13",
    "pyyaml>=6",
    'uvloop>=0.23; sys_platform != "win32" and platform_python_implementation == "CPython"',
]


@pytest.fixture(scope="module")
def dist_info(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The product's `.dist-info`, as setuptools' PEP 517 hook prepares it for pip."""
    copy = tmp_path_factory.mktemp("product")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, copy)
    shutil.copytree(
        REPO / "src",
        copy / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    out = copy / "out"
    out.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, setuptools.build_meta as backend; "
            "print(backend.prepare_metadata_for_build_wheel(sys.argv[1]))",
            str(out),
        ],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out / result.stdout.splitlines()[-1]


def test_the_product_requires_its_runtime_dependencies_only(dist_info: Path) -> None:
    metadata = HeaderParser().parsestr((dist_info / "METADATA").read_text())
    assert (metadata["Name"], metadata.get_all("Requires-Dist")) == ("ome-routing", RUNTIME)


def test_the_product_has_no_extras(dist_info: Path) -> None:
    """No `pip install '.[dev]'`: the test and check tools are the development kit's."""
    metadata = HeaderParser().parsestr((dist_info / "METADATA").read_text())
    assert metadata.get_all("Provides-Extra") is None


def test_the_products_wheel_holds_the_product_package_alone(dist_info: Path) -> None:
    egg_info = dist_info.parent / "ome_routing.egg-info"
    assert (egg_info / "top_level.txt").read_text().split() == ["ome_routing"]
    packages = {
        Path(line).parent.relative_to("src").as_posix()
        for line in (egg_info / "SOURCES.txt").read_text().splitlines()
        if line.startswith("src/") and line.endswith("/__init__.py")
    }
    assert packages == {
        "ome_routing",
        "ome_routing/cli",
        "ome_routing/core",
        "ome_routing/core/gojson",
        "ome_routing/kube",
        "ome_routing/kubectl",
        "ome_routing/observer",
        "ome_routing/reporter",
    }
