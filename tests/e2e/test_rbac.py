"""Least privilege: the controller runs as the chart's ServiceAccount under RBAC.

The chart's ServiceAccount, ClusterRole, Role and bindings (`helm template`) are applied
to the local API server (which authorizes with RBAC); the controller gets a token from
the TokenRequest API (`kubectl create token`) and runs with a kubeconfig that holds only
that token. It does its job, and the same token cannot read Secrets or write
InferenceServices. Its HTTP server answers /healthz, /readyz and /metrics and nothing
else, and none of them shows the token. The API server runs the
OwnerReferencesPermissionEnforcement admission plugin (as OpenShift does), so a TrafficMap
created with `blockOwnerDeletion` needs `inferenceservices/finalizers: update`.

And the role grants nothing the controller never uses: with every grant of the chart
rendered (EndpointSlices, BackendTLSPolicies), the controller routes, publishes, repairs,
withdraws and deletes as its ServiceAccount, and the API server's audit log of that run
(`tests/rbac_audit.py`) must show a request for each verb on each resource the chart
grants, but for a reviewed few that no request can use (`REASONED`).
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
    SHARD_GROUP_LABEL,
    SHARD_ROLE_LABEL,
    SHARDED_CHART_VALUES,
    SHARDED_REPLICAS,
    SHARDS,
    ControllerProcess,
    Reporter,
    entry,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)
from publisher_harness import Scene, gateway_api, scene, values
from tests.rbac_audit import Grant, exercised, granted, unexercised

from ome_routing.cli.controller import CONFIGMAP_KEY, LEASE_NAME
from ome_routing.core.shards import member_lease_name
from ome_routing.kube.sharding import COUNT_LABEL, STALE_MEMBER_LEASES
from ome_routing_dev.devcluster import LocalControlPlane

__all__ = ["gateway_api", "scene"]  # fixtures

CHART = Path(__file__).resolve().parents[2] / "charts" / "ome-resources"
SERVICE_ACCOUNT = "ome-ome-routing"  # the chart's default for the release `ome`
#: the ConfigMap the chart names for the release `ome`, passed with --config-map
CHART_CONFIGMAP = "ome-ome-routing-config"

pytestmark = pytest.mark.timeout(240)


#: every grant of the chart: EndpointSlices and BackendTLSPolicies
EVERY_GRANT = (
    "--set",
    "ome.multicluster.config.endpoint.gatewayBackend.hostnameEndpointSlices=true",
    "--set",
    "ome.multicluster.config.endpoint.gatewayBackend.tls.enabled=true",
    "--set",
    "journal.enabled=true",
)

#: grants that no request of the controller uses, each reviewed
REASONED: dict[Grant, str] = {
    ("ome.io", "inferenceservices/finalizers", "update"): (
        "never requested: OwnerReferencesPermissionEnforcement asks the authorizer for it "
        "when a TrafficMap is created with blockOwnerDeletion, as this run does"
    ),
    ("ome.io", "trafficmaps", "get"): (
        "read from the API server only after a write met a newer map (409), which a run "
        "meets only by chance (the publisher's and the routing writes racing)"
    ),
    **{
        (group, resource, "get"): (
            "read from the API server only while its kind's cache has not listed yet "
            "(PublishedObjects.holds), which the caches do before this run publishes"
        )
        for group, resource in (
            ("", "services"),
            ("discovery.k8s.io", "endpointslices"),
            ("gateway.networking.k8s.io", "backendtlspolicies"),
        )
    },
}


def chart_rbac(plane: LocalControlPlane, release_namespace: str, *sets: str) -> str:
    result = subprocess.run(
        [
            str(plane.tools.helm),
            "template",
            "ome",
            str(CHART),
            "--namespace",
            release_namespace,
            *SHARDED_CHART_VALUES,  # in sharded mode, the grants the replicas need
            *sets,
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


async def service_account_token(plane: LocalControlPlane, release_namespace: str) -> str:
    created = await kubectl(
        plane, "create", "token", SERVICE_ACCOUNT, "-n", release_namespace, "--duration=1h"
    )
    return created.stdout.strip()


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
        config, ROUTING_ON, tmp_path, lease=LEASE_NAME, namespace=release_namespace
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


#: the member Lease of a replica gone for good (sharded mode)
GONE_REPLICA = "gone-replica"


def stale_member_lease(namespace: str) -> str:
    """A member Lease of the group, last renewed long ago (a MicroTime needs its digits)."""
    return yaml.safe_dump(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": member_lease_name(LEASE_NAME, GONE_REPLICA),
                "namespace": namespace,
                "labels": {
                    SHARD_GROUP_LABEL: LEASE_NAME,
                    SHARD_ROLE_LABEL: "member",
                    COUNT_LABEL: str(SHARDS),
                },
            },
            "spec": {
                "holderIdentity": GONE_REPLICA,
                "leaseDurationSeconds": 4,
                "renewTime": "2026-01-01T00:00:00.000001Z",
            },
        }
    )


async def a_stale_member_lease_is_deleted(scene: Scene, namespace: str) -> None:
    """The replicas delete the gone replica's member Lease once they have seen it
    unrenewed for `STALE_MEMBER_LEASES` lease durations (4 s each here)."""
    name = member_lease_name(LEASE_NAME, GONE_REPLICA)

    async def gone() -> bool:
        out = await scene.kubectl("get", "lease", name, "-n", namespace, check=False)
        return "NotFound" in out

    await eventually(gone, 60 + STALE_MEMBER_LEASES * 4, f"lease {name} deleted")


def without_config_file(command: list[str]) -> list[str]:
    """The controller's command reading the chart's ConfigMap, as the chart runs it."""
    at = command.index("--config")
    return [*command[:at], "--config-map", CHART_CONFIGMAP, *command[at + 2 :]]


async def test_the_chart_grants_no_verb_the_controller_never_uses(
    scene: Scene, audit_log: Path, tmp_path: Path
) -> None:
    release = f"ome-rbac-{uuid.uuid4().hex[:6]}"
    await scene.kubectl("create", "namespace", release)
    rbac = chart_rbac(scene.plane, release, *EVERY_GRANT)
    await scene.kubectl("apply", "-f", "-", input=rbac)
    username = f"system:serviceaccount:{release}:{SERVICE_ACCOUNT}"
    process: ControllerProcess | None = None
    try:
        config = values(
            globalHostTemplate="",
            gatewayBackend={
                "rewriteHostname": True,
                "hostnameEndpointSlices": True,
                "tls": {"enabled": True, "wellKnownCACertificates": "System"},
            },
        )
        config["ome"]["multicluster"]["config"]["routing"]["journal"] = {"enabled": True}
        await scene.kubectl(
            "create", "configmap", CHART_CONFIGMAP, "-n", release,
            f"--from-literal={CONFIGMAP_KEY}={yaml.safe_dump(config)}",
        )  # fmt: skip
        if SHARDED_REPLICAS:
            # a member Lease of a replica gone for good, which the replicas delete
            await scene.kubectl("apply", "-f", "-", input=stale_member_lease(release))
        token = await service_account_token(scene.plane, release)
        kubeconfig = token_kubeconfig(scene.plane, token, tmp_path / "controller.kubeconfig")
        process = ControllerProcess(
            kubeconfig, config, tmp_path, lease=LEASE_NAME, namespace=release,
            wrap=without_config_file,
        ).start()  # fmt: skip
        await process.wait_started(timeout=60)
        await exercise(scene, audit_log, username)
        await an_orphan_is_checked_live(scene, audit_log, username)
        if SHARDED_REPLICAS:
            await a_stale_member_lease_is_deleted(scene, release)
        assert "forbidden" not in process.log.lower(), process.log
    finally:
        if process is not None:
            await process.stop()  # releases the Lease
        await scene.kubectl("delete", "-f", "-", input=rbac, check=False)
        await scene.kubectl("delete", "namespace", release, "--wait=false", check=False)

    grants = granted(rbac)
    used = exercised(audit_log, username)
    assert used, f"no request of {username} in {audit_log}"
    unused = unexercised(grants, used, REASONED)
    assert unused == [], f"granted, and used by no request: {unused}"
    assert set(REASONED) <= grants, "a reviewed grant the chart no longer makes"


async def journal_patched(audit_log: Path, username: str) -> bool:
    return ("events.k8s.io", "events", "patch") in exercised(audit_log, username)


async def exercise(scene: Scene, audit_log: Path, username: str) -> None:
    """Route and publish a service, move its weights, repair what was changed behind the
    controller's back, withdraw it, and stop routing it: every kind of write."""
    host = {"ome.io/global-host": "chat.global.example.com"}
    await scene.service("chat", {"worker-a": 1}, host)
    await scene.published("chat")
    await scene.place("chat", {"worker-a": 1, "worker-b": 1})

    async def two_backends() -> bool:
        route = await scene.get("httproute", "chat-global")
        return route is not None and len(route["spec"]["rules"][0]["backendRefs"]) == 2

    await eventually(two_backends, 60, "the route to gain a backend")
    published = "services,endpointslices,backendtlspolicies"
    await scene.kubectl("label", published, "--all", "-n", scene.namespace, "drifted=yes")
    await scene.place("chat", {"worker-a": 2, "worker-b": 1})

    async def repaired() -> bool:
        left = await scene.kubectl(
            "get", published, "-n", scene.namespace, "-l", "drifted", "-o", "name"
        )
        return left.strip() == ""

    await eventually(repaired, 60, "the publisher to repair the changed objects")
    # the journal: worker-a's weight 2 -> 1 -> 2 again within the series window, so its
    # second rise updates the first one's Event (create, then patch)
    for ready, split in (
        ({"worker-a": 1, "worker-b": 1}, [1, 1]),
        ({"worker-a": 2, "worker-b": 1}, [2, 1]),
    ):
        await scene.place("chat", ready)
        await scene.weights("chat", split)
    await eventually(
        lambda: journal_patched(audit_log, username), 60, "the journal to update a series"
    )
    await scene.kubectl(
        "annotate", "inferenceservice", "chat", "-n", scene.namespace, "ome.io/global-host-"
    )
    await scene.published("chat", "Withdrawn")
    await scene.kubectl(
        "patch", "inferenceservice", "chat", "-n", scene.namespace, "--type=merge",
        "-p", '{"spec": {"routing": {"enabled": false}}}',
    )  # fmt: skip

    async def map_gone() -> bool:
        return await get_map(scene.plane, "chat", scene.namespace) is None

    await eventually(map_gone, 60, "the controller to delete the TrafficMap")


async def an_orphan_is_checked_live(scene: Scene, audit_log: Path, username: str) -> None:
    """A map whose service left the cache is reaped only once a live read (a GET of the
    InferenceService) confirms the service gone."""
    await scene.service("gone", {"worker-a": 1})

    async def mapped() -> bool:
        return await get_map(scene.plane, "gone", scene.namespace) is not None

    await eventually(mapped, 60, "the controller to create the map of the second service")
    await scene.kubectl("delete", "inferenceservice", "gone", "-n", scene.namespace)

    async def read_live() -> bool:
        return ("ome.io", "inferenceservices", "get") in exercised(audit_log, username)

    await eventually(read_live, 60, "the controller to read the deleted service live")
