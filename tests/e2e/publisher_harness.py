"""Test parts for the publisher on the local control plane with the Gateway API CRDs.

`values(**endpoint)` is the guide's values file ("Publish a global endpoint", Step 1)
with changes; `Scene` runs controllers and places services on made-up workload hosts
(no capacity poll is configured, so they are never resolved).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_harness import ControllerProcess, eventually, get_map, kubectl

from ome_routing_dev.devcluster import LocalControlPlane
from ome_routing_dev.devcluster.gateway_tools import install_gateway_api_crds

GUIDE_ROUTE = (
    "-o",
    'jsonpath={.spec.hostnames[0]}{" "}{.spec.parentRefs[0].namespace}{"/"}'
    '{.spec.parentRefs[0].name}{"\\n"}{range .spec.rules[0].backendRefs[*]}'
    '{.filters[0].urlRewrite.hostname}{" weight="}{.weight}{"\\n"}{end}',
)
GUIDE_PUBLISHED = (
    "-o",
    'jsonpath={range .status.conditions[?(@.type=="Published")]}{.status}{" "}{.reason}'
    '{": "}{.message}{"\\n"}{end}',
)


def values(**endpoint: Any) -> dict[str, Any]:
    block = {
        "globalGateway": "gateway-system/global",
        "backendPort": 80,
        "globalHostTemplate": "{{ .Name }}.{{ .Namespace }}.global.example.com",
        "gatewayBackend": {"rewriteHostname": True},
    }
    block.update(endpoint)
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": {"enabled": True}, "endpoint": block},
            }
        }
    }


@pytest.fixture(scope="module")
def gateway_api(control_plane: LocalControlPlane) -> LocalControlPlane:
    install_gateway_api_crds(control_plane.kubectl, control_plane.wait_established)
    return control_plane


@dataclass
class Scene:
    plane: LocalControlPlane
    kubeconfig: Path
    workdir: Path
    namespace: str
    controllers: list[ControllerProcess]

    async def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        result = await kubectl(self.plane, *args, input=input, check=check)
        return result.stdout if check else result.stdout + result.stderr

    async def start(self, config: dict[str, Any]) -> ControllerProcess:
        process = ControllerProcess(
            self.kubeconfig, config, self.workdir, lease=f"lease-{uuid.uuid4().hex[:8]}"
        )
        self.controllers.append(process.start())
        await process.wait_started()
        return process

    async def service(
        self, name: str, ready: dict[str, int], annotations: dict[str, str] | None = None
    ) -> None:
        """A routed service placed on `worker-*` homes with these ready replicas."""
        manifest = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "model": {"name": name},
                "placement": {"policy": "ClusterAffinity", "mode": "All"},
                "routing": {},
            },
        }
        if annotations:
            manifest["metadata"]["annotations"] = annotations  # type: ignore[index]
        await self.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        await self.place(name, ready)

    async def place(self, name: str, ready: dict[str, int]) -> None:
        candidates = [
            {
                "cluster": cluster,
                "phase": "Admitted",
                "endpoint": f"http://{name}.{self.namespace}.{cluster}.example.com/",
                "admittedReplicas": 4,
                "readyReplicas": count,
            }
            for cluster, count in ready.items()
        ]
        patch = {"status": {"placement": {"phase": "Placed", "candidates": candidates}}}
        await self.kubectl(
            "patch", "inferenceservice", name, "-n", self.namespace,
            "--subresource=status", "--type=merge", "-p", json.dumps(patch),
        )  # fmt: skip

    async def get(self, kind: str, name: str) -> dict[str, Any] | None:
        result = await kubectl(
            self.plane, "get", kind, name, "-n", self.namespace, "-o", "json", check=False
        )
        return json.loads(result.stdout) if result.returncode == 0 else None

    async def published(self, name: str, reason: str = "Published") -> dict[str, Any]:
        async def seen() -> dict[str, Any] | None:
            tmap = await get_map(self.plane, name, self.namespace)
            conditions = (tmap or {}).get("status", {}).get("conditions", [])
            found = [c for c in conditions if c["type"] == "Published"]
            return tmap if found and found[0]["reason"] == reason else None

        return await eventually(seen, what=f"Published {reason}")

    async def weights(self, name: str, expected: list[int]) -> dict[str, Any]:
        async def seen() -> dict[str, Any] | None:
            route = await self.get("httproute", f"{name}-global")
            if route is None:
                return None
            refs = route["spec"]["rules"][0]["backendRefs"]
            return route if [r["weight"] for r in refs] == expected else None

        return await eventually(seen, what=f"route weights {expected}")


@pytest.fixture
async def scene(
    gateway_api: LocalControlPlane, kubeconfig: Path, tmp_path: Path, namespace: str
) -> AsyncIterator[Scene]:
    scene = Scene(gateway_api, kubeconfig, tmp_path, namespace, [])
    try:
        yield scene
    finally:
        for process in scene.controllers:
            await process.stop()


def labels(namespace: str, name: str, cluster: str | None = None) -> dict[str, str]:
    found = {
        "ome.io/managed-by": "placement-endpoint",
        "ome.io/placement-endpoint-isvc": name,
        "ome.io/placement-endpoint-isvc-namespace": namespace,
    }
    if cluster:
        found["ome.io/placement-cluster"] = cluster
    return found
