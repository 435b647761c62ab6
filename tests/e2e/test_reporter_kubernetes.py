"""`ome-routing reporter --kubernetes` on the local control plane acting as a workload cluster.

Pods are Pod objects whose status the test sets (Ready, not Ready, terminating), with
their IP on loopback and a model-server stand-in on each pod's declared port. The routing
controller polls the reporter, and its ceiling follows the pods.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    STALE_IN_3S,
    ControllerProcess,
    entry,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)
from reporter_harness import (
    ModelServer,
    ReporterProcess,
    add_pod,
    release_pods,
    set_ready,
    start_terminating,
)

from ome_routing.core.report import parse_rfc3339
from ome_routing_dev.devcluster import LocalControlPlane, Tools, faults

SERVICE = "svc"


async def reported(plane: LocalControlPlane, namespace: str, cluster: str = "worker-a") -> Any:
    tmap = await get_map(plane, SERVICE, namespace)
    if tmap is None or not tmap.get("spec", {}).get("entries"):
        return None
    return entry(tmap, cluster)["capacity"].get("reported")


async def until_reported(
    plane: LocalControlPlane, namespace: str, value: int, timeout: float = 30.0
) -> None:
    async def seen() -> bool:
        return await reported(plane, namespace) == value

    await eventually(seen, timeout, f"reported capacity {value}")


async def until_dropped_as_stale(
    plane: LocalControlPlane, namespace: str, timeout: float
) -> dict[str, Any]:
    """Wait for worker-a to lose its ceiling within `timeout`, then for the stale reason.

    The reporter serves its last stamp again and again; readings taken before that stamp
    age out first. When polls run late, fewer than quorum readings can be left for a
    moment, and the ceiling drops first with "awaiting quorum after stale samples expired"
    until the next poll finds the report stale.
    """

    async def dropped() -> Any:
        tmap = await get_map(plane, SERVICE, namespace)
        capacity = entry(tmap, "worker-a")["capacity"]
        return capacity if "reported" not in capacity else None

    await eventually(dropped, timeout, "the ceiling to drop")

    async def stale() -> Any:
        capacity = await dropped()
        reason = capacity and capacity.get("fallbackReason", "")
        return capacity if reason and reason.startswith("capacity report is stale") else None

    return await eventually(stale, 30.0, "the report to be found stale")  # type: ignore[no-any-return]


@pytest.fixture
async def model_servers() -> AsyncIterator[list[ModelServer]]:
    servers = [await ModelServer().start() for _ in range(3)]
    try:
        yield servers
    finally:
        for server in servers:
            await server.stop()


@pytest.fixture
async def cleanup(control_plane: LocalControlPlane, namespace: str) -> AsyncIterator[list[Any]]:
    """Processes to stop after the test, and the test's pods released from their finalizer."""
    started: list[Any] = []
    try:
        yield started
    finally:
        for process in reversed(started):
            await process.stop()
        await release_pods(control_plane, namespace)


async def test_the_ceiling_follows_pods_going_unready_failing_health_and_terminating(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    model_servers: list[ModelServer],
    cleanup: list[Any],
) -> None:
    """One cluster is both: the workload cluster's pods and the control plane's service."""
    await kubectl(
        control_plane, "apply", "-f", "-", input=isvc_manifest(SERVICE, namespace, FAST_POLL)
    )
    for i, server in enumerate(model_servers):
        await add_pod(control_plane, f"{SERVICE}-engine-{i}", namespace, SERVICE, server.port)
    reporter = await ReporterProcess(
        kubeconfig,
        tmp_path,
        "--health-path",
        "/health",
        "--health-period",
        "1s",
        "--health-timeout",
        "500ms",
    ).start()
    cleanup.append(reporter)
    # shared-host shape: the endpoint's path is /<namespace>/<name>/
    endpoint = f"{reporter.url}/{namespace}/{SERVICE}/"
    await place(control_plane, SERVICE, namespace, {"worker-a": endpoint}, admitted=3, ready=3)
    controller = ControllerProcess(kubeconfig, ROUTING_ON, tmp_path, lease="reporter-e2e").start()
    cleanup.append(controller)
    await controller.wait_started()
    await until_reported(control_plane, namespace, 3)

    await set_ready(control_plane, f"{SERVICE}-engine-1", namespace, False)
    await until_reported(control_plane, namespace, 2)

    model_servers[2].status = 503
    await until_reported(control_plane, namespace, 1)

    await set_ready(control_plane, f"{SERVICE}-engine-1", namespace, True)
    model_servers[2].status = 200
    await until_reported(control_plane, namespace, 3)

    await start_terminating(control_plane, f"{SERVICE}-engine-0", namespace)
    await until_reported(control_plane, namespace, 2)

    async def bound() -> bool:
        # the ceiling is the window's quorum-th lowest (samples 3, quorum 2), so it binds
        # from the second reading of 2 on, a poll after `reported` shows the first
        tmap = await get_map(control_plane, SERVICE, namespace)
        return entry(tmap, "worker-a")["capacity"]["source"] == "Endpoint"

    await eventually(bound, 30, "the reported ceiling to bind")
    metrics = (await reporter.get("/metrics"))[1]
    assert (
        f'ome_routing_reporter_servable{{inferenceservice="{SERVICE}",namespace="{namespace}"}} 2.0'
        in metrics
    )
    assert 'ome_routing_reporter_health_checks_total{result="failed"}' in metrics


async def test_each_poll_url_shape_reaches_its_service_and_others_get_404(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    model_servers: list[ModelServer],
    cleanup: list[Any],
) -> None:
    await kubectl(control_plane, "apply", "-f", "-", input=isvc_manifest(SERVICE, namespace))
    await add_pod(control_plane, "engine-0", namespace, SERVICE, model_servers[0].port)
    await add_pod(control_plane, "engine-1", namespace, SERVICE, model_servers[1].port)
    await set_ready(control_plane, "engine-1", namespace, False)
    reporter = await ReporterProcess(kubeconfig, tmp_path).start()
    cleanup.append(reporter)
    subdomain = f"{SERVICE}.{namespace}.worker-a.example.com"
    for host, path in [
        (subdomain, "/capacity"),
        ("llm.worker-a.example.com", f"/{namespace}/{SERVICE}/capacity"),
        (f"{subdomain}:8080", "/capacity"),
    ]:
        status, body = await reporter.get(path, host)
        assert status == 200, (host, path, body)
        assert body["servable"] == 1
        age = datetime.now(UTC) - parse_rfc3339(body["observedAt"])
        assert age.total_seconds() < 60
    assert (await reporter.get(f"/{namespace}/other/capacity", "llm.example.com"))[0] == 404
    assert (await reporter.get("/capacity", f"other.{namespace}.example.com"))[0] == 404


@pytest.fixture
def workload_plane(tmp_path: Path, tools: Tools) -> Any:
    with LocalControlPlane(tmp_path / "workload", tools=tools) as plane:
        yield plane


async def test_a_reporter_whose_watch_is_cut_lets_the_controller_drop_the_ceiling_in_max_age(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    workload_plane: LocalControlPlane,
    model_servers: list[ModelServer],
    cleanup: list[Any],
) -> None:
    """The workload cluster's API server stops: the reporter keeps its count and its stamp."""
    await kubectl(
        control_plane, "apply", "-f", "-", input=isvc_manifest(SERVICE, namespace, STALE_IN_3S)
    )
    await kubectl(workload_plane, "create", "namespace", namespace)
    await kubectl(workload_plane, "apply", "-f", "-", input=isvc_manifest(SERVICE, namespace))
    for i in range(2):
        await add_pod(workload_plane, f"engine-{i}", namespace, SERVICE, model_servers[i].port)
    reporter = await ReporterProcess(workload_plane.kubeconfig, tmp_path).start()
    cleanup.append(reporter)
    endpoint = f"{reporter.url}/{namespace}/{SERVICE}/"
    await place(control_plane, SERVICE, namespace, {"worker-a": endpoint}, admitted=3, ready=3)
    controller = ControllerProcess(kubeconfig, ROUTING_ON, tmp_path, lease="reporter-cut").start()
    cleanup.append(controller)
    await controller.wait_started()
    await until_reported(control_plane, namespace, 2)

    faults.kill(workload_plane, "kube-apiserver")

    # maxAge is 3s: the last stamp ages out; allow a few periods for the write
    capacity = await until_dropped_as_stale(control_plane, namespace, 15.0)
    assert (
        capacity["fallbackReason"]
        == "capacity report is stale (at least configured maximum age 3s)"
    )
    status, first = await reporter.get(f"/{namespace}/{SERVICE}/capacity")
    assert status == 200 and first["servable"] == 2
    status, again = await reporter.get(f"/{namespace}/{SERVICE}/capacity")
    assert again["observedAt"] == first["observedAt"]

    faults.restart(workload_plane, "kube-apiserver")
    # the reporter lists again after its backoff (up to 30s), then quorum needs two polls
    await until_reported(control_plane, namespace, 2, timeout=60.0)


async def test_a_watch_on_a_hung_api_server_is_found_idle_and_the_ceiling_drops(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    workload_plane: LocalControlPlane,
    model_servers: list[ModelServer],
    cleanup: list[Any],
) -> None:
    """SIGSTOP keeps the watch's connection open but silent, as a network partition does."""
    manifest = isvc_manifest(SERVICE, namespace, STALE_IN_3S)
    await kubectl(control_plane, "apply", "-f", "-", input=manifest)
    await kubectl(workload_plane, "create", "namespace", namespace)
    await kubectl(workload_plane, "apply", "-f", "-", input=isvc_manifest(SERVICE, namespace))
    await add_pod(workload_plane, "engine-0", namespace, SERVICE, model_servers[0].port)
    reporter = await ReporterProcess(
        workload_plane.kubeconfig, tmp_path, "--watch-idle-timeout", "2s"
    ).start()
    cleanup.append(reporter)
    endpoint = f"{reporter.url}/{namespace}/{SERVICE}/"
    await place(control_plane, SERVICE, namespace, {"worker-a": endpoint}, admitted=3, ready=3)
    controller = ControllerProcess(kubeconfig, ROUTING_ON, tmp_path, lease="reporter-hung").start()
    cleanup.append(controller)
    await controller.wait_started()
    await until_reported(control_plane, namespace, 1)

    apiserver = workload_plane.pids["kube-apiserver"]
    os.kill(apiserver, signal.SIGSTOP)
    try:
        capacity = await until_dropped_as_stale(control_plane, namespace, 20.0)
        assert capacity["fallbackReason"].startswith("capacity report is stale")
    finally:
        os.kill(apiserver, signal.SIGCONT)
    await until_reported(control_plane, namespace, 1, timeout=60.0)
