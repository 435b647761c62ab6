"""The ome-resources chart on a real API server: its manifests apply, and its ConfigMap
is what the controller reads when it starts without --config."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ome_routing_dev.devcluster import LocalControlPlane

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ome-resources"
EXAMPLES = ROOT / "examples"

#: the ConfigMap of the release `ome`, which the chart's Deployment names with --config-map
CONFIGMAP = "ome-ome-routing-config"

pytestmark = pytest.mark.timeout(180)


def helm_template(plane: LocalControlPlane, namespace: str, *args: str) -> str:
    result = subprocess.run(
        [str(plane.tools.helm), "template", "ome", str(CHART), "--namespace", namespace, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def ome_namespace(control_plane: LocalControlPlane) -> str:
    """The namespace `ome`, as the spec installs the release."""
    if control_plane.kubectl("get", "namespace", "ome", check=False).returncode != 0:
        control_plane.kubectl("create", "namespace", "ome")
    return "ome"


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["-f", str(EXAMPLES / "values.yaml")],
        ["--set", "crds.inferenceService.install=false", "--set", "dashboards.enabled=true"],
    ],
    ids=["defaults", "spec-values", "without-isvc-crd"],
)
def test_the_rendered_manifests_pass_a_server_side_dry_run(
    control_plane: LocalControlPlane, ome_namespace: str, values: list[str], tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(helm_template(control_plane, ome_namespace, *values))
    result = control_plane.kubectl(
        "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-f", str(manifests)
    )
    applied = result.stdout.splitlines()
    assert any(line.startswith("deployment.apps/ome-ome-routing ") for line in applied)
    assert any(line.startswith(f"configmap/{CONFIGMAP} ") for line in applied)
    assert any(
        line.startswith("customresourcedefinition.apiextensions.k8s.io/trafficmaps.ome.io")
        for line in applied
    )
    assert all(line.endswith("(server dry run)") for line in applied), applied


async def test_a_broken_value_in_the_charts_configmap_stops_the_controller(
    control_plane: LocalControlPlane, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    """The spec's troubleshooting case, through the ConfigMap path the Deployment uses."""
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    values["ome"]["multicluster"]["config"]["routing"]["capacity"]["period"] = "10"
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    configmap = tmp_path / "configmap.yaml"
    configmap.write_text(
        helm_template(
            control_plane,
            namespace,
            "-f",
            str(values_file),
            "--show-only",
            "templates/configmap.yaml",
        )
    )
    control_plane.kubectl("apply", "-f", str(configmap))

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ome_routing.cli.main", "controller",
        "--kubeconfig", str(kubeconfig), "--namespace", namespace, "--config-map", CONFIGMAP,
        "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0",
        "--log-format", "console",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 1
    assert (
        'invalid multi-cluster configuration: routing.capacity.period: "10" is not a duration '
        '(use forms like "30s", "5m")'
    ) in output.decode()


async def test_the_charts_configmap_with_the_spec_values_starts_the_controller(
    control_plane: LocalControlPlane, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    configmap = tmp_path / "configmap.yaml"
    configmap.write_text(
        helm_template(
            control_plane,
            namespace,
            "-f",
            str(EXAMPLES / "values.yaml"),
            "--show-only",
            "templates/configmap.yaml",
        )
    )
    control_plane.kubectl("apply", "-f", str(configmap))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ome_routing.cli.main", "controller",
        "--kubeconfig", str(kubeconfig), "--namespace", namespace, "--config-map", CONFIGMAP,
        "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0",
        "--no-leader-elect",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    log = b""
    try:
        async with asyncio.timeout(60):
            while b"serving /metrics" not in log:
                line = await process.stdout.readline()
                assert line, f"the controller stopped: {log.decode()}"
                log += line
    finally:
        process.terminate()
        await process.wait()
    assert b"invalid multi-cluster configuration" not in log
