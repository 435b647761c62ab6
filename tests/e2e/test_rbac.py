"""Least privilege: the controller runs as the chart's ServiceAccount under RBAC.

The chart's ServiceAccount, ClusterRole, Role and bindings (`helm template`) are applied
to the local API server (which authorizes with RBAC); the controller gets a token from
the TokenRequest API (`kubectl create token`) and runs with a kubeconfig that holds only
that token. It does its job, and the same token cannot read Secrets or write
InferenceServices. Its HTTP server answers /healthz, /readyz and /metrics and nothing
else, and none of them shows the token.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    ControllerProcess,
    Reporter,
    entry,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)

from ome_routing.devcluster import LocalControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "ome-resources"
SERVICE_ACCOUNT = "ome-ome-routing"  # the chart's default for the release `ome`

pytestmark = pytest.mark.timeout(240)


def chart_rbac(plane: LocalControlPlane, release_namespace: str) -> str:
    result = subprocess.run(
        [
            str(plane.tools.helm),
            "template",
            "ome",
            str(CHART),
            "--namespace",
            release_namespace,
            "--show-only",
            "templates/serviceaccount.yaml",
            "--show-only",
            "templates/rbac.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def token_kubeconfig(plane: LocalControlPlane, token: str, path: Path) -> Path:
    """The admin kubeconfig's cluster, with a user that has nothing but `token`."""
    admin: dict[str, Any] = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "controller", "user": {"token": token}}],
        "contexts": [
            {"name": "controller", "context": {"cluster": cluster["name"], "user": "controller"}}
        ],
        "current-context": "controller",
    }
    path.write_text(yaml.safe_dump(config))
    return path


async def as_controller(
    plane: LocalControlPlane, kubeconfig: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [str(plane.tools.kubectl), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
async def release_namespace(control_plane: LocalControlPlane) -> AsyncIterator[str]:
    name = f"ome-rbac-{uuid.uuid4().hex[:6]}"
    await kubectl(control_plane, "create", "namespace", name)
    try:
        yield name
    finally:
        await kubectl(
            control_plane, "delete", "-f", "-", input=chart_rbac(control_plane, name), check=False
        )
        await asyncio.to_thread(control_plane.delete_namespace, name)


@pytest.fixture
async def reporter() -> AsyncIterator[Reporter]:
    started = await Reporter(servable=1).start()
    try:
        yield started
    finally:
        await started.stop()


async def test_the_charts_service_account_is_enough_and_no_more(
    control_plane: LocalControlPlane,
    release_namespace: str,
    namespace: str,
    reporter: Reporter,
    tmp_path: Path,
) -> None:
    await kubectl(
        control_plane, "apply", "-f", "-", input=chart_rbac(control_plane, release_namespace)
    )
    token = (
        await kubectl(
            control_plane,
            "create",
            "token",
            SERVICE_ACCOUNT,
            "-n",
            release_namespace,
            "--duration=1h",
        )
    ).stdout.strip()
    config = token_kubeconfig(control_plane, token, tmp_path / "controller.kubeconfig")
    assert (
        await as_controller(control_plane, config, "auth", "whoami", "-o", "yaml")
    ).stdout.count(f"system:serviceaccount:{release_namespace}:{SERVICE_ACCOUNT}") == 1

    manifest = isvc_manifest("svc", namespace, FAST_POLL)
    await kubectl(control_plane, "apply", "-f", "-", input=manifest)
    await place(control_plane, "svc", namespace, {"worker-a": reporter.url})
    process = ControllerProcess(
        config, ROUTING_ON, tmp_path, lease="rbac", namespace=release_namespace
    ).start()
    try:
        await process.wait_started(timeout=60)

        async def ceiling() -> bool:
            tmap = await get_map(control_plane, "svc", namespace)
            if tmap is None or not tmap["spec"].get("entries"):
                return False
            return entry(tmap, "worker-a")["capacity"].get("reported") == 1

        await eventually(ceiling, 60, "the controller to write the map as its ServiceAccount")
        assert "forbidden" not in process.log.lower(), process.log

        denied = {
            "list Secrets": ("get", "secrets", "-A"),
            "get a Secret": ("get", "secret", "anything", "-n", release_namespace),
            "patch an InferenceService": (
                "patch",
                "inferenceservice",
                "svc",
                "-n",
                namespace,
                "--type=merge",
                "-p",
                '{"metadata":{"labels":{"touched":"yes"}}}',
            ),
            "delete an InferenceService": ("delete", "inferenceservice", "svc", "-n", namespace),
            "create an InferenceService": ("apply", "-f", "-"),
        }
        for what, args in denied.items():
            result = await asyncio.to_thread(
                subprocess.run,
                [str(control_plane.tools.kubectl), "--kubeconfig", str(config), *args],
                input=isvc_manifest("other", namespace, FAST_POLL),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert result.returncode != 0 and "forbidden" in result.stderr.lower(), (
                f"the controller's ServiceAccount may {what}: {result.stdout}{result.stderr}"
            )

        await only_health_and_metrics(await process.probe_port(), await process.bound_port(), token)
    finally:
        await process.stop()


async def only_health_and_metrics(probe_port: int, metrics_port: int, token: str) -> None:
    """/healthz and /readyz answer on the probe port, /metrics on its own; any other path
    or method does not."""
    served = {probe_port: ("/healthz", "/readyz"), metrics_port: ("/metrics",)}
    async with aiohttp.ClientSession(trust_env=False) as session:
        for port, paths in served.items():
            base = f"http://127.0.0.1:{port}"
            for path in paths:
                async with session.get(base + path) as response:
                    body = await response.text()
                    assert response.status == 200, path
                    assert token not in body and "BEGIN" not in body, f"{path} shows a credential"
            others = ("/", "/debug/pprof/", "/env", "/config", "/metrics/../config", "/%2e%2e/etc")
            for path in (*others, *(p for p in ("/healthz", "/metrics") if p not in paths)):
                async with session.get(base + path) as response:
                    assert response.status == 404, f"GET {path} answered {response.status}"
            for method in ("POST", "PUT", "DELETE"):
                async with session.request(method, base + paths[0]) as response:
                    assert response.status == 405, f"{method} {paths[0]} answered {response.status}"
