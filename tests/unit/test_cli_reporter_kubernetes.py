"""`ome-routing reporter --kubernetes`: the options it refuses before it starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ome_routing.cli.reporter import reporter


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--servable", "3"], "--kubernetes takes neither --servable nor --servable-file"),
        (
            ["--serve-health-path", "/v1/models"],
            "--kubernetes takes neither --serve-health-path nor --serve-health-file",
        ),
        (
            ["--health-path", "/health", "--health-timeout", "5s", "--health-period", "5s"],
            "--health-timeout (5s) must be shorter than --health-period (5s)",
        ),
        (["--health-path", "health"], "'health' must start with /"),
        (["--health-period", "5"], '"5" is not a duration (use forms like "30s", "5m")'),
        (["--path", "capacity"], "'capacity' must start with /"),
    ],
)
def test_unusable_options_stop_it_with_a_message(
    args: list[str], message: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    result = CliRunner().invoke(reporter, ["--kubernetes", "--kubeconfig", str(kubeconfig), *args])
    assert result.exit_code == 2
    assert message in result.output


def test_without_credentials_it_says_it_cannot_reach_the_api_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = CliRunner().invoke(reporter, ["--kubernetes", "--port", "0"])
    assert result.exit_code == 1
    assert "connect to the API server:" in result.output


def test_the_demo_refuses_the_kubernetes_reporter_with_traffic() -> None:
    """The traffic step serves each home's model server beside fixed-count reporters."""
    from ome_routing_dev.cli.demo import demo

    result = CliRunner().invoke(demo, ["--kubernetes-reporter", "--traffic"])
    assert result.exit_code == 2
    assert "--kubernetes-reporter and --traffic can't be combined" in result.output
