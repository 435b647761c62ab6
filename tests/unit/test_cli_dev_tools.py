"""`ome-routing dev tools --only`: builds only the sets asked for (`make demo` relies on it).

The builders are replaced by recorders: what is tested is which of them the command asks
for, not the builds themselves (those run in every suite that needs a tool).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ome_routing_dev.cli import dev
from ome_routing_dev.devcluster import Tools


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    calls: list[str] = []

    def recorder(name: str) -> Callable[..., Path]:
        def build(progress: object = None) -> Path:
            calls.append(name)
            return tmp_path / name

        return build

    def control_plane() -> Tools:
        calls.append("control-plane")
        return Tools(
            kube_apiserver=tmp_path / "kube-apiserver",
            etcd=tmp_path / "etcd",
            kubectl=tmp_path / "kubectl",
            helm=tmp_path / "helm",
        )

    monkeypatch.setattr(dev, "_tools", control_plane)
    monkeypatch.setattr(dev, "ensure_traefik", recorder("traefik"))
    monkeypatch.setattr(dev, "ensure_gateway_api_crds", recorder("gateway-api"))
    monkeypatch.setattr(dev, "ensure_contour", recorder("contour"))
    monkeypatch.setattr(dev, "ensure_contour_crds", recorder("contour-crds"))
    monkeypatch.setattr(dev, "envoy_binary", lambda: calls.append("envoy") or tmp_path / "envoy")
    monkeypatch.setattr(dev, "ensure_promtool", recorder("promtool"))
    return calls


def run(*args: str) -> str:
    result = CliRunner().invoke(dev.dev, ["tools", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_without_only_every_tool_is_built(built: list[str]) -> None:
    run()
    assert built == [
        "control-plane",
        "traefik",
        "gateway-api",
        "contour",
        "contour-crds",
        "envoy",
        "promtool",
    ]


def test_the_demo_without_root_builds_the_control_plane_alone(built: list[str]) -> None:
    output = run("--only", "control-plane")
    assert built == ["control-plane"]
    assert "traefik" not in output and "promtool" not in output


def test_the_demo_as_root_adds_traefik_and_the_gateway_api_crds_only(built: list[str]) -> None:
    run("--only", "control-plane", "--only", "traefik")
    assert built == ["control-plane", "traefik", "gateway-api"]


def test_contour_brings_envoy_and_both_crd_sets(built: list[str]) -> None:
    run("--only", "contour")
    assert built == ["control-plane", "gateway-api", "contour", "contour-crds", "envoy"]


def test_an_unknown_set_is_refused_with_the_choices() -> None:
    result = CliRunner().invoke(dev.dev, ["tools", "--only", "nginx"])
    assert result.exit_code == 2
    assert (
        "'nginx' is not one of 'control-plane', 'traefik', 'contour', 'promtool'" in result.output
    )
