"""Real requests through Traefik follow the TrafficMap the controller publishes.

The controller runs with routing and the publisher on, in our hostname-EndpointSlice mode,
inside the gateway's name sandbox (its capacity polls resolve the homes' hostnames there).
Each workload cluster is a stand-in on its own 127.x.y.z address serving both the model
(`served by <cluster>`) and the capacity Report; the global host is requested through the
gateway. Counts are exact: Traefik's weighted round robin is deterministic.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from controller_harness import (
    FAST_POLL,
    ControllerProcess,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)
from gw_clusters import ClusterServer, StartServers, home_host
from gw_objects import eventually as until
from gw_objects import send, split

from ome_routing.devcluster.gateway import LocalGateway
from ome_routing.devcluster.gateway_names import namespace_file

pytestmark = pytest.mark.timeout(240)

ISVC = "chat"
HOST_TEMPLATE = "{{ .Name }}.{{ .Namespace }}.global.example.com"


def controller_values(gateway: LocalGateway, backend_port: int) -> dict[str, Any]:
    """Routing on, and the publisher writing hostname EndpointSlices for Traefik."""
    endpoint = {
        "globalGateway": gateway.gateway_ref,
        "backendPort": backend_port,
        "globalHostTemplate": HOST_TEMPLATE,
        "gatewayBackend": {"hostnameEndpointSlices": True},
    }
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": {"enabled": True}, "endpoint": endpoint},
            }
        }
    }


class Published:
    """One service placed on worker-a and worker-b, published through the gateway."""

    def __init__(
        self, gateway: LocalGateway, namespace: str, servers: dict[str, ClusterServer]
    ) -> None:
        self.gateway = gateway
        self.namespace = namespace
        self.servers = servers
        self.host = f"{ISVC}.{namespace}.global.example.com"
        self.port = next(iter(servers.values())).port

    @property
    def homes(self) -> dict[str, str]:
        return {cluster: f"http://{home_host(cluster)}:{self.port}" for cluster in self.servers}

    async def map_weights(self) -> dict[str, int]:
        tmap = await get_map(self.gateway.plane, ISVC, self.namespace)
        entries = ((tmap or {}).get("spec") or {}).get("entries") or []
        return {e["cluster"]: e.get("weight", 0) for e in entries}

    async def route_weights(self) -> list[int]:
        result = await kubectl(
            self.gateway.plane,
            "get",
            "httproute",
            f"{ISVC}-global",
            "-n",
            self.namespace,
            "-o",
            "json",
            check=False,
        )
        if result.returncode != 0:
            return []
        rules = json.loads(result.stdout)["spec"]["rules"]
        return [ref.get("weight", 1) for ref in rules[0]["backendRefs"]]

    async def published(self) -> bool:
        tmap = await get_map(self.gateway.plane, ISVC, self.namespace)
        conditions = ((tmap or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Published" and c["status"] == "True" for c in conditions)


@pytest.fixture
async def published(
    gateway: LocalGateway,
    gateway_namespace: str,
    cluster_servers: StartServers,
    tmp_path: Path,
) -> AsyncIterator[tuple[Published, ControllerProcess]]:
    servers = await cluster_servers(["worker-a", "worker-b"])
    servers["worker-a"].servable, servers["worker-b"].servable = 2, 1
    scene = Published(gateway, gateway_namespace, servers)
    plane = gateway.plane
    await kubectl(
        plane, "apply", "-f", "-", input=isvc_manifest(ISVC, gateway_namespace, FAST_POLL)
    )
    await place(plane, ISVC, gateway_namespace, scene.homes, admitted=2, ready=2)
    controller = ControllerProcess(
        plane.kubeconfig,
        controller_values(gateway, scene.port),
        tmp_path,
        lease=f"gw-{gateway_namespace}",
        namespace=gateway_namespace,
        wrap=gateway.sandbox.wrap,
    ).start()
    try:
        await controller.wait_started()
        await eventually(scene.published, 60, "the TrafficMap to be published")
        yield scene, controller
    finally:
        await controller.stop()


async def test_requests_split_by_the_published_weights(
    published: tuple[Published, ControllerProcess],
) -> None:
    """Ceilings 2 and 1 give weights 2:1; 300 requests through the gateway split 200/100."""
    scene, _ = published
    weights = await until(scene.map_weights, lambda w: w == {"worker-a": 2, "worker-b": 1}, 60)
    assert await until(scene.route_weights, lambda w: w == [2, 1]) == [2, 1]
    # Traefik applies a new route after its provider throttle: wait until it serves 2:1.
    await until(
        lambda: split(scene.gateway, scene.host, 30),
        lambda s: s == {"worker-a": 20, "worker-b": 10},
    )
    served = await split(scene.gateway, scene.host, 300)
    assert served == {c: 100 * w for c, w in weights.items()}


async def test_the_split_follows_a_weight_change(
    published: tuple[Published, ControllerProcess],
) -> None:
    scene, _ = published
    await until(scene.map_weights, lambda w: w == {"worker-a": 2, "worker-b": 1}, 60)
    scene.servers["worker-a"].servable = 1
    await until(scene.map_weights, lambda w: w == {"worker-a": 1, "worker-b": 1}, 60)
    await until(scene.route_weights, lambda w: w == [1, 1])
    served = await until(
        lambda: split(scene.gateway, scene.host, 60), lambda s: s.get("worker-a") == 30
    )
    assert served == {"worker-a": 30, "worker-b": 30}


async def test_all_zero_weights_answer_503_no_available_server(
    published: tuple[Published, ControllerProcess],
) -> None:
    scene, _ = published
    for server in scene.servers.values():
        server.servable = 0
    await until(scene.map_weights, lambda w: w == {"worker-a": 0, "worker-b": 0}, 60)
    await until(scene.route_weights, lambda w: w == [0, 0])
    answers = await until(lambda: send(scene.gateway, scene.host, 1), lambda a: a[0][0] == 503)
    assert answers == [(503, "no available server\n")]


async def test_no_dns_query_left_the_machine(
    published: tuple[Published, ControllerProcess],
) -> None:
    """The controller and Traefik resolve the homes from the sandbox's hosts file."""
    scene, controller = published
    await until(lambda: send(scene.gateway, scene.host, 1), lambda a: a[0][0] == 200)
    # every home's name was resolved by the controller too (its polls reached each home;
    # the homes held at start have their first polls spread over a period)
    await until(lambda: {c: s.polls for c, s in scene.servers.items()}, lambda p: all(p.values()))
    recorder = scene.gateway.sandbox.recorder
    for pid in (controller.process.pid, scene.gateway.pid):  # type: ignore[union-attr]
        resolv = namespace_file(pid, "/etc/resolv.conf").splitlines()
        assert [line for line in resolv if line.startswith("nameserver")] == [
            f"nameserver {recorder.address}"
        ]
    homes = {home_host(c) for c in scene.servers}
    assert [q for q in recorder.queries if q.name in homes or q.name == scene.host] == []
