"""`kubectl ome get trafficmaps` and `kubectl ome traffic status|explain` through the real
kubectl, on the local control plane."""

from __future__ import annotations

import json

import pytest
import yaml
from kubectl_ome_harness import create_isvc, create_trafficmap, plugin_env, run_ome
from lightkube import AsyncClient
from lightkube.types import PatchType

from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(120)
__all__ = ["plugin_env"]

ENTRIES = [
    {
        "cluster": "worker-a",
        "endpoint": "https://chat.worker-a.example.com",
        "weight": 1,
        "healthy": True,
    },
    {
        "cluster": "worker-b",
        "endpoint": "https://chat.worker-b.example.com",
        "weight": 0,
        "healthy": False,
    },
]


@pytest.fixture
async def chat(kube_client: AsyncClient, namespace: str) -> str:
    uid = await create_isvc(kube_client, namespace, "chat")
    await create_trafficmap(kube_client, namespace, "chat", uid, ENTRIES)
    return "chat"


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


@pytest.mark.parametrize("alias", ["trafficmaps", "trafficmap", "tm", "tmap"])
async def test_get_lists_the_maps_with_omes_columns(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    chat: str,
    alias: str,
) -> None:
    result = await run_ome(control_plane, plugin_env, "get", alias, "-n", namespace)
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert rows[0] == ["NAME", "MODE", "TARGETS", "ROUTABLE", "PUBLISHED", "AGE"]
    assert rows[1][:5] == ["chat", "All", "2", "True", "Unknown"]


async def test_get_wide_adds_omes_wide_columns(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str, chat: str
) -> None:
    result = await run_ome(
        control_plane, plugin_env, "get", "tm", "chat", "-n", namespace, "-o", "wide"
    )
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert rows[0][6:] == [
        "SERVICE",
        "ACTIVE",
        "HEALTHY",
        "OVERRIDE",
        "OVERRIDE-REASON",
        "REASON",
        "GATEWAY",
        "PUBLISHER-FRESHNESS",
    ]
    assert rows[1][6:] == ["chat", "1", "1", "False", "NoOverrides", "Routable", "-", "Unobserved"]


async def test_get_all_namespaces_and_a_selector(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    await kube_client.patch(
        TrafficMap, "chat", {"metadata": {"labels": {"tier": "gold"}}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip
    everywhere = await run_ome(control_plane, plugin_env, "get", "tm", "-A", "-l", "tier=gold")
    assert everywhere.returncode == 0, everywhere.stderr
    rows = table(everywhere.stdout)
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert [namespace, "chat"] in [row[:2] for row in rows[1:]]
    none = await run_ome(
        control_plane, plugin_env, "get", "tm", "-n", namespace, "-l", "tier=silver"
    )
    assert (none.returncode, none.stdout) == (0, "")
    assert none.stderr == f'No trafficmaps found in namespace "{namespace}".\n'


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_get_prints_the_objects_as_stored(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    chat: str,
    output: str,
) -> None:
    named = await run_ome(
        control_plane, plugin_env, "get", "tm", "chat", "-n", namespace, "-o", output
    )
    assert named.returncode == 0, named.stderr
    document = json.loads(named.stdout) if output == "json" else yaml.safe_load(named.stdout)
    assert (document["kind"], document["spec"]["service"]) == ("TrafficMap", "chat")
    listed = await run_ome(control_plane, plugin_env, "get", "tm", "-n", namespace, "-o", output)
    document = json.loads(listed.stdout) if output == "json" else yaml.safe_load(listed.stdout)
    assert (document["kind"], len(document["items"])) == ("List", 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tm", "nothing"), "error: get trafficmaps {ns}/nothing: NotFound\n"),
        (("isvc",), 'error: unknown resource "isvc" (valid resources: trafficmaps)\n'),
        (("tm", "chat", "-A"), "error: a resource name cannot be combined with --all-namespaces\n"),
        (
            ("tm", "-o", "xml"),
            'error: unsupported output format "xml" (supported: table, wide, json, yaml)\n',
        ),
    ],
)
async def test_get_refusals(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    args: tuple[str, ...],
    message: str,
) -> None:
    result = await run_ome(control_plane, plugin_env, "get", *args, "-n", namespace)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == message.format(ns=namespace)


# --- traffic status and explain ----------------------------------------------------------


async def test_traffic_status_of_a_routed_service_reports_no_traffic_status(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str, chat: str
) -> None:
    result = await run_ome(control_plane, plugin_env, "traffic", "status", "chat", "-n", namespace)
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert rows[0] == ["FIELD", "COMP", "VALUE", "SOURCE"]
    assert rows[1] == ["STATE", "-", "Unavailable", "Computed/Unverifiable"]
    assert ["ISSUE", "-", "TrafficStatusMissing", "Computed/Unverifiable"] in rows


async def test_traffic_status_and_explain_report_a_recorded_policy(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    kube_client: AsyncClient,
    namespace: str,
    chat: str,
) -> None:
    isvc = await kube_client.get(InferenceService, "chat", namespace=namespace)
    generation = isvc.metadata.generation
    traffic = {
        "algorithm": "Default",
        "backendPolicyResource": {
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "BackendTrafficPolicy",
            "name": "chat",
        },
        "targetedHTTPRoutes": ["chat"],
        "conditions": [
            {
                "type": "BackendPolicyReady",
                "status": "True",
                "reason": "AcceptedByGateway",
                "message": "accepted by the gateway",
                "observedGeneration": generation,
                "lastTransitionTime": "2026-09-28T10:00:00Z",
            }
        ],
    }
    await kube_client.patch(
        InferenceService.Status, "chat", {"status": {"traffic": traffic}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip
    status = await run_ome(
        control_plane, plugin_env, "traffic", "status", "chat", "-n", namespace, "-o", "json"
    )
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert (report["kind"], report["content"]["summary"]["state"]) == (
        "TrafficStatusReport",
        "Reported",
    )
    assert report["content"]["summary"]["translator"] == "envoy-gateway"
    assert "accepted by the gateway" not in status.stdout
    explain = await run_ome(
        control_plane, plugin_env, "traffic", "explain", "chat", "-n", namespace
    )
    assert explain.returncode == 0, explain.stderr
    rows = table(explain.stdout)
    assert rows[0] == ["LAYER", "STATE", "VALUE", "SOURCE"]
    assert rows[1] == ["SUMMARY", "NoIntent", "-", "Computed/Current"]
    assert rows[4] == ["TRANSLATE", "Computed", "envoy-gateway", "Computed/Current"]


@pytest.mark.parametrize(
    ("verb", "message"),
    [
        (
            "status",
            'error: get InferenceService "{ns}/nothing": inferenceservices.ome.io "nothing" not found\n',
        ),
        ("explain", 'error: get InferenceService "{ns}/nothing": not found\n'),
    ],
)
async def test_traffic_status_and_explain_of_a_missing_service_exit_1(
    control_plane: LocalControlPlane,
    plugin_env: dict[str, str],
    namespace: str,
    verb: str,
    message: str,
) -> None:
    result = await run_ome(control_plane, plugin_env, "traffic", verb, "nothing", "-n", namespace)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == message.format(ns=namespace)


async def test_the_drain_follow_up_command_runs(
    control_plane: LocalControlPlane, plugin_env: dict[str, str], namespace: str, chat: str
) -> None:
    drained = await run_ome(
        control_plane, plugin_env, "traffic", "drain", "chat", "-n", namespace,
        "--workload-cluster", "worker-a", "--id", "maintenance-a", "--reason", "planned",
        "--yes", "-o", "json",
    )  # fmt: skip
    assert drained.returncode == 0, drained.stderr
    follow_up = json.loads(drained.stdout)["followUp"].split()
    assert follow_up[:4] == ["kubectl", "ome", "traffic", "status"]
    result = await run_ome(control_plane, plugin_env, *follow_up[2:])
    assert result.returncode == 0, result.stderr
    assert table(result.stdout)[1][:3] == ["STATE", "-", "Unavailable"]
