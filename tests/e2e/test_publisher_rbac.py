"""The publisher needs no more than the chart grants: it publishes as the chart's ServiceAccount.

The chart's RBAC, rendered for the hostname-EndpointSlice mode, is applied to the local
API server; the controller runs with a token of the ServiceAccount only, publishes a
service (route, Services, EndpointSlices), and withdraws it, with no `forbidden` in its
log.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from controller_harness import ControllerProcess, kubectl
from publisher_harness import Scene, gateway_api, scene, values
from test_rbac import SERVICE_ACCOUNT, chart_rbac, token_kubeconfig

from ome_routing.cli.controller import LEASE_NAME
from ome_routing.core.publication import backend_service_name
from ome_routing_dev.devcluster import LocalControlPlane

__all__ = ["gateway_api", "scene"]  # fixtures

pytestmark = pytest.mark.timeout(240)

HOSTNAME_MODE = "ome.multicluster.config.endpoint.gatewayBackend.hostnameEndpointSlices=true"


@pytest.fixture
async def release(gateway_api: LocalControlPlane) -> AsyncIterator[str]:
    name = f"ome-rbac-{uuid.uuid4().hex[:6]}"
    await kubectl(gateway_api, "create", "namespace", name)
    rbac = chart_rbac(gateway_api, name, "--set", HOSTNAME_MODE)
    await kubectl(gateway_api, "apply", "-f", "-", input=rbac)
    try:
        yield name
    finally:
        await kubectl(gateway_api, "delete", "-f", "-", input=rbac, check=False)
        await kubectl(gateway_api, "delete", "namespace", name, "--wait=false", check=False)


async def test_the_chart_grants_what_publishing_needs(
    scene: Scene, release: str, tmp_path: Path
) -> None:
    token = (
        await scene.kubectl("create", "token", SERVICE_ACCOUNT, "-n", release, "--duration=1h")
    ).strip()
    config = token_kubeconfig(scene.plane, token, tmp_path / "controller.kubeconfig")
    await scene.service("chat", {"worker-a": 1}, {"ome.io/global-host": "chat.global.example.com"})
    block = values(
        globalHostTemplate="",
        gatewayBackend={"rewriteHostname": True, "hostnameEndpointSlices": True},
    )
    process = ControllerProcess(
        config, block, tmp_path, lease=LEASE_NAME, namespace=release
    ).start()
    scene.controllers.append(process)
    await process.wait_started(timeout=60)
    await scene.published("chat")
    name = backend_service_name(scene.namespace, "chat", "worker-a")
    assert await scene.get("endpointslice", f"{name}-fqdn") is not None

    await scene.kubectl(
        "annotate", "inferenceservice", "chat", "-n", scene.namespace, "ome.io/global-host-"
    )
    await scene.published("chat", "Withdrawn")
    assert await scene.get("endpointslice", f"{name}-fqdn") is None
    assert "forbidden" not in process.log.lower(), process.log
