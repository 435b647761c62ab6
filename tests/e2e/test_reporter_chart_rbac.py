"""The capacity reporter's chart against the real API server: its RBAC is enough and no more,
and its label selector finds InferenceServices at install time.

The chart's ServiceAccount, ClusterRole and binding (`helm template`) are applied to the
local API server, which authorizes with RBAC; the reporter runs with a kubeconfig that
holds only that ServiceAccount's token, and counts; the same token can't read Secrets,
change pods or write InferenceServices.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_harness import isvc_manifest, kubectl
from reporter_harness import ModelServer, ReporterProcess, add_pod, release_pods
from test_rbac import token_kubeconfig

from ome_routing_dev.devcluster import LocalControlPlane, Tools

CHART = Path(__file__).resolve().parents[2] / "charts" / "ome-capacity-reporter"
FIXTURES = Path(__file__).parent / "fixtures"
SERVICE_ACCOUNT = "caps-ome-capacity-reporter"

pytestmark = pytest.mark.timeout(240)


def helm(plane: LocalControlPlane, *args: str) -> str:
    result = subprocess.run(
        [str(plane.tools.helm), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def chart_rbac(plane: LocalControlPlane, release_namespace: str) -> str:
    return helm(
        plane,
        "template",
        "caps",
        str(CHART),
        "--namespace",
        release_namespace,
        "--show-only",
        "templates/serviceaccount.yaml",
        "--show-only",
        "templates/rbac.yaml",
    )


@pytest.fixture
async def release_namespace(control_plane: LocalControlPlane) -> AsyncIterator[str]:
    name = f"caps-rbac-{uuid.uuid4().hex[:6]}"
    await kubectl(control_plane, "create", "namespace", name)
    try:
        yield name
    finally:
        await kubectl(
            control_plane, "delete", "-f", "-", input=chart_rbac(control_plane, name), check=False
        )
        await asyncio.to_thread(control_plane.delete_namespace, name)


async def test_the_reporters_service_account_is_enough_and_no_more(
    control_plane: LocalControlPlane, release_namespace: str, namespace: str, tmp_path: Path
) -> None:
    await kubectl(
        control_plane, "apply", "-f", "-", input=chart_rbac(control_plane, release_namespace)
    )
    token = (
        await kubectl(control_plane, "create", "token", SERVICE_ACCOUNT, "-n", release_namespace)
    ).stdout.strip()
    config = token_kubeconfig(control_plane, token, tmp_path / "reporter.kubeconfig")
    await kubectl(control_plane, "apply", "-f", "-", input=isvc_manifest("svc", namespace))
    server = await ModelServer().start()
    reporter = ReporterProcess(config, tmp_path)
    try:
        await add_pod(control_plane, "engine-0", namespace, "svc", server.port)
        await reporter.start()
        status, body = await reporter.get(f"/{namespace}/svc/capacity")
        assert (status, body["servable"]) == (200, 1)
        assert "forbidden" not in reporter.log.lower(), reporter.log

        denied = {
            "list Secrets": ("get", "secrets", "-A"),
            "list ConfigMaps": ("get", "configmaps", "-A"),
            "delete a pod": ("delete", "pod", "engine-0", "-n", namespace, "--wait=false"),
            "patch a pod": (
                "label",
                "pod",
                "engine-0",
                "-n",
                namespace,
                "touched=yes",
            ),
            "patch an InferenceService": (
                "label",
                "inferenceservice",
                "svc",
                "-n",
                namespace,
                "touched=yes",
            ),
            "list TrafficMaps": ("get", "trafficmaps", "-A"),
        }
        for what, args in denied.items():
            result = await asyncio.to_thread(
                subprocess.run,
                [str(control_plane.tools.kubectl), "--kubeconfig", str(config), *args],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert result.returncode != 0 and "forbidden" in result.stderr.lower(), (
                f"the reporter's ServiceAccount may {what}: {result.stdout}{result.stderr}"
            )
    finally:
        await reporter.stop()
        await server.stop()
        await release_pods(control_plane, namespace)


@pytest.fixture
def workload_plane(tmp_path: Path, tools: Tools) -> Iterator[LocalControlPlane]:
    """A control plane of its own, with a schemaless HTTPRoute kind for helm to map."""
    with LocalControlPlane(tmp_path / "workload", tools=tools) as plane:
        plane.install_crds([FIXTURES / "crds" / "httproutes-schemaless.yaml"])
        yield plane


async def test_the_selector_routes_labelled_services_by_their_status_url(
    workload_plane: LocalControlPlane, tmp_path: Path
) -> None:
    """Helm's lookup on a live cluster: only labelled services with a URL get a route."""
    control_plane = workload_plane
    namespace = "models"
    await kubectl(control_plane, "create", "namespace", namespace)
    for name, labels, url in [
        ("shared", {"capacity-reporter": "true"}, f"http://llm.example.com/{namespace}/shared/"),
        ("own-host", {"capacity-reporter": "true"}, f"http://own-host.{namespace}.example.com/"),
        ("unlabelled", {}, f"http://llm.example.com/{namespace}/unlabelled/"),
        ("no-url", {"capacity-reporter": "true"}, None),
    ]:
        manifest: dict[str, Any] = yaml.safe_load(isvc_manifest(name, namespace))
        manifest["metadata"]["labels"] = labels
        await kubectl(control_plane, "apply", "-f", "-", input=yaml.safe_dump(manifest))
        if url is not None:
            await kubectl(
                control_plane,
                "patch",
                "inferenceservice",
                name,
                "-n",
                namespace,
                "--subresource=status",
                "--type=merge",
                "-p",
                f'{{"status":{{"url":"{url}"}}}}',
            )
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "route": {
                    "enabled": True,
                    "gateway": {"name": "gw", "namespace": "gateways"},
                    "selector": {"matchLabels": {"capacity-reporter": "true"}},
                }
            }
        )
    )
    rendered = await asyncio.to_thread(
        helm,
        control_plane,
        "template",
        "caps",
        str(CHART),
        "--namespace",
        "reporter",
        "-f",
        str(values),
        "--dry-run=server",
        "--kubeconfig",
        str(control_plane.kubeconfig),
    )
    routes = sorted(
        (r["spec"]["hostnames"], r["spec"]["rules"][0]["matches"][0]["path"]["value"])
        for r in yaml.safe_load_all(rendered)
        if r and r["kind"] == "HTTPRoute"
    )
    assert routes == [
        (["llm.example.com"], f"/{namespace}/shared/capacity"),
        ([f"own-host.{namespace}.example.com"], "/capacity"),
    ]
