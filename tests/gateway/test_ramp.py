"""A ramped recovery through the real controller, publisher and Traefik (ramps are ours).

worker-a and worker-b serve 2 replicas each (targets 1:1). worker-b's reporter drops to 0:
its ceiling 0 takes its weight to 0 at once. It reports 2 again: with
`routing.ome-routing.io/max-increase-per-period: "0.25"` its ramped capacity climbs 0.5, 1,
1.5, 2 replicas, one step a poll period (2s): the map and the HTTPRoute go 4:1, 2:1, 4:3,
1:1 (ceil(1/0.25) = 4 steps, the first when the ceiling comes back), and Traefik, whose
weighted round robin is exact, splits the requests 1:1 at the end. Without a ramp the
same recovery is one step, 1:0 to 1:1, and nothing of ours is written.

Every version of the map and the route is taken from a watch, so no step can be missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_harness import ControllerProcess, eventually, isvc_manifest, kubectl, place
from gw_clusters import ClusterServer, StartServers, home_host
from gw_objects import eventually as until
from gw_objects import split
from gw_published import ISVC, controller_values, exact_split
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.generic_resource import create_namespaced_resource

from ome_routing.core.report import parse_rfc3339
from ome_routing.kube.resources import TrafficMap
from ome_routing_dev.devcluster.gateway import LocalGateway

pytestmark = pytest.mark.timeout(180)

HTTPRoute = create_namespaced_resource("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes")
RAMP = "routing.ome-routing.io/ramp"
#: A 2s poll: each ramp step stays long enough for the publisher to write its route.
POLL = {
    "path": "/capacity", "method": "GET", "format": "Report", "samples": 3, "quorum": 2,
    "period": "2s", "timeout": "500ms", "maxAge": "20s",
}  # fmt: skip
PERIOD = timedelta(seconds=2)
RAMPED = [(4, 1), (2, 1), (4, 3), (1, 1)]


class Recorder:
    """Every version of one object from a watch that starts at `since`."""

    def __init__(self, client: AsyncClient, resource: Any, namespace: str, name: str) -> None:
        self.versions: list[dict[str, Any]] = []
        self._args = (client, resource, namespace, name)
        self._task: asyncio.Task[None] | None = None

    def start(self, since: str) -> None:
        self._task = asyncio.create_task(self._record(since))

    async def _record(self, since: str) -> None:
        client, resource, namespace, name = self._args
        watch = client.watch(
            resource, namespace=namespace, fields={"metadata.name": name}, resource_version=since
        )
        async for _, obj in watch:
            self.versions.append(obj.to_dict())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def map_weights(tmap: dict[str, Any]) -> tuple[int, ...]:
    return tuple(e.get("weight", 0) for e in (tmap.get("spec") or {}).get("entries") or [])


def route_weights(route: dict[str, Any]) -> tuple[int, ...]:
    rules = (route.get("spec") or {}).get("rules") or [{}]
    return tuple(ref.get("weight", 1) for ref in rules[0].get("backendRefs") or [])


#: worker-b lost: where the watches start
LOST = (1, 0)


def changes(values: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The values after LOST, in order, each repeat of the one before left out."""
    values = [LOST, *values]
    return [v for i, v in enumerate(values) if i > 0 and v != values[i - 1]]


class Scene:
    def __init__(
        self, gateway: LocalGateway, namespace: str, servers: dict[str, ClusterServer]
    ) -> None:
        self.gateway = gateway
        self.namespace = namespace
        self.servers = servers
        self.host = f"{ISVC}.{namespace}.global.example.com"
        self.client = AsyncClient(
            KubeConfig.from_file(gateway.plane.kubeconfig), trust_env=False, field_manager="e2e"
        )
        self.maps = Recorder(self.client, TrafficMap, namespace, ISVC)
        self.routes = Recorder(self.client, HTTPRoute, namespace, f"{ISVC}-global")
        self.controller: ControllerProcess | None = None

    async def get(self, resource: Any, name: str) -> dict[str, Any]:
        obj = await self.client.get(resource, name, namespace=self.namespace)
        return dict(obj.to_dict())

    async def record_from_now(self) -> None:
        tmap = await self.get(TrafficMap, ISVC)
        route = await self.get(HTTPRoute, f"{ISVC}-global")
        self.maps.start(tmap["metadata"]["resourceVersion"])
        self.routes.start(route["metadata"]["resourceVersion"])

    async def get_or_none(self, resource: Any, name: str) -> dict[str, Any]:
        """The object, or {} while it does not exist yet."""
        try:
            return await self.get(resource, name)
        except ApiError as err:
            if err.status.code != 404:
                raise
            return {}

    async def weights_are(self, weights: tuple[int, ...]) -> None:
        """The map and the route carry `weights` (worker-a, worker-b)."""
        tmap = lambda: self.get_or_none(TrafficMap, ISVC)  # noqa: E731
        await until(tmap, lambda m: map_weights(m) == weights, 60)
        route = lambda: self.get_or_none(HTTPRoute, f"{ISVC}-global")  # noqa: E731
        await until(route, lambda r: route_weights(r) == weights, 60)

    async def traefik_serves(self, weights: dict[str, int]) -> None:
        """Traefik applies a new route after its provider throttle: a window of requests
        split exactly as weighted shows it serves it."""
        window = 10 * sum(weights.values())
        await until(
            lambda: split(self.gateway, self.host, window),
            lambda s: s == exact_split(weights, window),
            60,
        )


@contextlib.asynccontextmanager
async def scene(
    traefik: LocalGateway,
    namespace: str,
    cluster_servers: StartServers,
    tmp_path: Path,
    annotations: dict[str, str],
) -> AsyncIterator[Scene]:
    servers = await cluster_servers(["worker-a", "worker-b"])
    servers["worker-a"].servable = servers["worker-b"].servable = 2
    result = Scene(traefik, namespace, servers)
    plane = traefik.plane
    manifest = yaml.safe_load(isvc_manifest(ISVC, namespace, POLL))
    manifest["metadata"]["annotations"] = annotations
    await kubectl(plane, "apply", "-f", "-", input=json.dumps(manifest))
    port = servers["worker-a"].port
    homes = {c: f"http://{home_host(c)}:{port}" for c in servers}
    await place(plane, ISVC, namespace, homes, admitted=2, ready=2)
    controller = ControllerProcess(
        plane.kubeconfig,
        controller_values(traefik, port),
        tmp_path,
        lease=f"gw-{namespace}",
        namespace=namespace,
        wrap=traefik.sandbox.wrap,
    ).start()
    result.controller = controller
    try:
        await controller.wait_started()
        await result.weights_are((1, 1))
        yield result
    finally:
        await result.maps.stop()
        await result.routes.stop()
        await controller.stop()
        await result.client.close()


async def lose_and_recover_worker_b(scene: Scene) -> None:
    """worker-b's ceiling drops to 0 (weight 0 at once), then its reports come back."""
    scene.servers["worker-b"].servable = 0
    await scene.weights_are(LOST)
    await scene.traefik_serves({"worker-a": 1, "worker-b": 0})
    await scene.record_from_now()
    scene.servers["worker-b"].servable = 2


async def test_a_recovering_home_reaches_its_share_in_the_stated_periods(
    traefik: LocalGateway, gateway_namespace: str, cluster_servers: StartServers, tmp_path: Path
) -> None:
    annotations = {"routing.ome-routing.io/max-increase-per-period": "0.25"}
    async with scene(traefik, gateway_namespace, cluster_servers, tmp_path, annotations) as s:
        await lose_and_recover_worker_b(s)
        await s.weights_are((1, 1))
        tmap = await s.get(TrafficMap, ISVC)
        route = await s.get(HTTPRoute, f"{ISVC}-global")
        await eventually(
            lambda: _has(s.maps.versions, tmap["metadata"]["resourceVersion"]), 30, "the map"
        )
        await eventually(
            lambda: _has(s.routes.versions, route["metadata"]["resourceVersion"]), 30, "the route"
        )
        # the map: four steps, each as computed, each with its periods left
        versions = s.maps.versions
        assert changes([map_weights(v) for v in versions]) == RAMPED
        weights = [LOST, *(map_weights(v) for v in versions)]
        steps = [
            json.loads(v["metadata"]["annotations"][RAMP])
            for i, v in enumerate(versions)
            if weights[i + 1] != weights[i]
        ]
        assert [step["homes"]["worker-b"]["periodsLeft"] for step in steps] == [3, 2, 1, 0]
        assert [step["homes"]["worker-b"]["ramped"] for step in steps] == ["0.5", "1", "1.5", "2"]
        stamps = [parse_rfc3339(step["steppedAt"]) for step in steps]
        assert all(b - a >= PERIOD for a, b in pairwise(stamps))
        # the route follows every step
        assert changes([route_weights(v) for v in s.routes.versions]) == RAMPED
        # and Traefik splits exactly by the target at the end
        await s.traefik_serves({"worker-a": 1, "worker-b": 1})
        served = await split(s.gateway, s.host, 200)
        assert served == exact_split({"worker-a": 1, "worker-b": 1}, 200)


async def test_without_a_ramp_the_recovery_is_one_step_and_nothing_of_ours_is_written(
    traefik: LocalGateway, gateway_namespace: str, cluster_servers: StartServers, tmp_path: Path
) -> None:
    async with scene(traefik, gateway_namespace, cluster_servers, tmp_path, {}) as s:
        await lose_and_recover_worker_b(s)
        await s.weights_are((1, 1))
        tmap = await s.get(TrafficMap, ISVC)
        await eventually(
            lambda: _has(s.maps.versions, tmap["metadata"]["resourceVersion"]), 30, "the map"
        )
        assert changes([map_weights(v) for v in s.maps.versions]) == [(1, 1)]
        assert "annotations" not in tmap["metadata"]
        route = await s.get(HTTPRoute, f"{ISVC}-global")
        assert not [k for k in route["metadata"].get("annotations") or {} if "ome-routing.io" in k]
        await s.traefik_serves({"worker-a": 1, "worker-b": 1})


async def _has(versions: list[dict[str, Any]], resource_version: str) -> bool:
    return any(v["metadata"]["resourceVersion"] == resource_version for v in versions)
