"""promtool's build: the release a pinned module version is, and the cache folder it lands in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ome_routing_dev.devcluster.promtool import (
    PROMETHEUS_MODULE,
    prometheus_release,
    promtool_target,
)
from ome_routing_dev.devcluster.tools import ensure_binary


@pytest.mark.parametrize(
    ("module_version", "release"),
    [
        ("v0.316.0", "3.16.0"),
        ("v0.300.1", "3.0.1"),
        ("v0.54.1", "2.54.1"),
        ("v0.0.0-20260101000000-0123456789ab", "v0.0.0-20260101000000-0123456789ab"),
    ],
)
def test_a_module_version_names_its_prometheus_release(module_version: str, release: str) -> None:
    assert prometheus_release(module_version) == release


def a_module(folder: Path, version: str = "v0.316.0") -> Path:
    folder.mkdir()
    (folder / "go.mod").write_text(f"module m\n\nrequire (\n\t{PROMETHEUS_MODULE} {version}\n)\n")
    (folder / "go.sum").write_text("")
    (folder / "build.sh").write_text("#!/bin/sh\n")
    return folder


def test_the_cache_folder_is_named_for_the_pinned_version(tmp_path: Path) -> None:
    target = promtool_target(tmp_path / "cache", a_module(tmp_path / "promtool"))
    assert target.parent == tmp_path / "cache"
    assert target.name.startswith("promtool-v0.316.0-")


@pytest.mark.parametrize("changed", ["go.mod", "go.sum", "build.sh"])
def test_a_changed_build_input_is_a_new_build(tmp_path: Path, changed: str) -> None:
    module = a_module(tmp_path / "promtool")
    before = promtool_target(tmp_path, module)
    with (module / changed).open("a") as file:
        file.write("\n// changed\n")
    assert promtool_target(tmp_path, module) != before


def test_the_repository_pins_the_module_it_builds() -> None:
    # the checkout's module, not the one found from the package (on the compiled run the
    # package is a copy outside the checkout)
    module = Path(__file__).resolve().parents[2] / "tools" / "promtool"
    assert module.is_dir(), module
    name = promtool_target(Path("/cache"), module).name
    assert re.fullmatch(r"promtool-v0\.\d+\.\d+-[0-9a-f]{12}", name), name


def test_a_cached_binary_is_built_once_and_rebuilt_when_its_stamp_is_missing(
    tmp_path: Path,
) -> None:
    """`tools.ensure_binary`, which the promtool, Traefik and Contour caches go through."""
    target = tmp_path / "thing-v1-abc"
    binary = target / "thing"
    builds: list[str] = []

    def build() -> None:
        builds.append("built")
        target.mkdir(parents=True, exist_ok=True)
        binary.write_text("#!/bin/true\n")
        (target / ".complete").write_text("")

    assert ensure_binary(tmp_path, target, binary, build, lambda _m: None) == binary
    assert ensure_binary(tmp_path, target, binary, build, lambda _m: None) == binary
    assert builds == ["built"]
    (target / ".complete").unlink()  # an interrupted build leaves no stamp
    ensure_binary(tmp_path, target, binary, build, lambda _m: None)
    assert builds == ["built", "built"]
