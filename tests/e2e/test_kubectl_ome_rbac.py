"""`kubectl ome` as users with only some permissions, on the local API server's RBAC.

Each user is a ServiceAccount of the test's namespace with a token from the TokenRequest
API and a Role, and runs the plugin with a kubeconfig holding nothing but that token:
- `reader` (get/list InferenceServices and TrafficMaps) reads every report, and its
  drain is refused by the API server after the preview: nothing changes.
- `services-only` (get InferenceServices) gets the placement report with the TrafficMap
  `Forbidden`, exit code 0, and `traffic status`.
- `nobody` is refused the InferenceService: exit code 1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubectl_ome_harness import (
    create_isvc,
    create_trafficmap,
    field_values,
    plugin_env,
    run_ome,
    token_kubeconfig,
)
from lightkube import AsyncClient

from ome_routing.core.drains import ANNOTATION
from ome_routing.kube.resources import InferenceService
from ome_routing.kubectl import drain_checks
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(180)
__all__ = ["plugin_env"]

READ = ["get", "list"]
ROLES: dict[str, list[dict[str, Any]]] = {
    "reader": [
        {"apiGroups": ["ome.io"], "resources": ["inferenceservices", "trafficmaps"], "verbs": READ}
    ],
    "services-only": [
        {"apiGroups": ["ome.io"], "resources": ["inferenceservices"], "verbs": ["get"]}
    ],
    "nobody": [],
}


def rbac_manifest(namespace: str, user: str) -> str:
    documents = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": user, "namespace": namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": user, "namespace": namespace},
            "rules": ROLES[user],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": user, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"kind": "ServiceAccount", "name": user, "namespace": namespace}],
        },
    ]
    return yaml.safe_dump_all(documents)


async def as_user(
    plane: LocalControlPlane, env: dict[str, str], namespace: str, user: str, tmp_path: Path
) -> dict[str, str]:
    """The plugin's environment with a kubeconfig that holds only `user`'s token."""
    manifest = rbac_manifest(namespace, user)
    await asyncio.to_thread(plane.kubectl, "apply", "-f", "-", input=manifest)
    created = await asyncio.to_thread(plane.kubectl, "create", "token", user, "-n", namespace)
    path = token_kubeconfig(
        plane, created.stdout.strip(), tmp_path / f"{user}.kubeconfig", namespace
    )
    return {**env, "KUBECONFIG": str(path)}


@pytest.fixture
async def chat(kube_client: AsyncClient, namespace: str) -> str:
    uid = await create_isvc(kube_client, namespace, "chat")
    entries = [
        {"cluster": "worker-a", "endpoint": "https://chat.worker-a.example.com", "weight": 1}
    ]
    await create_trafficmap(kube_client, namespace, "chat", uid, entries)
    return "chat"


async def test_a_reader_reads_every_report_and_cannot_drain(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
    tmp_path: Path,
) -> None:
    env = await as_user(control_plane, plugin_env, namespace, "reader", tmp_path)
    endpoint = await run_ome(control_plane, env, "placement", "endpoint", "chat")
    assert endpoint.returncode == 0, endpoint.stderr
    assert field_values(endpoint.stdout, "TrafficMap state") == ["Observed"]
    listed = await run_ome(control_plane, env, "get", "trafficmaps")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[0] == "chat"
    for verb in ("status", "explain"):
        result = await run_ome(control_plane, env, "traffic", verb, "chat")
        assert result.returncode == 0, (verb, result.stderr)

    drained = await run_ome(
        control_plane, env, "traffic", "drain", "chat", "--workload-cluster", "worker-a",
        "--id", "maintenance-a", "--reason", "planned", "--yes",
    )  # fmt: skip
    assert (drained.returncode, drained.stdout) == (1, "")
    assert drained.stderr.endswith(f"error: {drain_checks.READ_FAILED}\n")
    isvc = await kube_client.get(InferenceService, "chat", namespace=namespace)
    assert ANNOTATION not in (isvc.metadata.annotations or {})


async def test_without_trafficmaps_the_report_says_forbidden_and_exits_0(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    chat: str,
    tmp_path: Path,
) -> None:
    env = await as_user(control_plane, plugin_env, namespace, "services-only", tmp_path)
    result = await run_ome(control_plane, env, "placement", "endpoint", "chat", "-o", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["content"]["routing"]["acquisition"]["reason"] == "Forbidden"
    assert report["sources"][1]["unavailableReason"] == "Forbidden"
    status = await run_ome(control_plane, env, "traffic", "status", "chat")
    assert status.returncode == 0, status.stderr
    listed = await run_ome(control_plane, env, "get", "tm")
    assert (listed.returncode, listed.stderr) == (
        1,
        f"error: list trafficmaps {namespace}: Forbidden\n",
    )


async def test_without_the_inferenceservice_the_command_fails(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    chat: str,
    tmp_path: Path,
) -> None:
    env = await as_user(control_plane, plugin_env, namespace, "nobody", tmp_path)
    result = await run_ome(control_plane, env, "placement", "endpoint", "chat")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "error: InferenceService read unavailable: Forbidden\n"
    explained = await run_ome(control_plane, env, "traffic", "explain", "chat")
    assert explained.stderr == f'error: get InferenceService "{namespace}/chat": forbidden\n'
