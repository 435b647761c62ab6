"""A service published by the real controller through a real gateway, and how to check a split.

`publish(...)` places the service on the given clusters, runs the controller with routing
and the publisher on (inside the gateway's name sandbox: its polls and probes resolve the
homes' hostnames there) and waits until the TrafficMap is `Published`. The publisher writes
OME's default ExternalName backends for Contour, and hostname EndpointSlices for Traefik,
which refuses ExternalName.

`Published.serving(weights)` waits until the map, the route and the gateway itself use
`weights`: Traefik's weighted round robin is deterministic, so a window of requests shows
it exactly; Envoy draws per request, so its own route table is read (its admin interface)
instead. `Published.check(served, weights)` asserts a split: exactly for Traefik, by the
binomial test of `gw_stats` for Envoy.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from controller_harness import (
    FAST_POLL,
    ControllerProcess,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)
from gw_clusters import ClusterServer, home_host
from gw_objects import eventually as until
from gw_objects import split
from gw_stats import split_is_plausible

from ome_routing_dev.devcluster.gateway_base import SandboxedGateway
from ome_routing_dev.devcluster.gateway_contour import ContourGateway

ISVC = "chat"
HOST_TEMPLATE = "{{ .Name }}.{{ .Namespace }}.global.example.com"


def controller_values(
    gateway: SandboxedGateway,
    backend_port: int,
    probe: dict[str, Any] | None = None,
    **backend: Any,
) -> dict[str, Any]:
    """Routing on, and the publisher writing the backends the gateway serves (plus any
    `gatewayBackend` options such as rewriteHostname or tls)."""
    gateway_backend = dict(backend)
    if gateway.needs_hostname_endpoint_slices:
        gateway_backend["hostnameEndpointSlices"] = True
    endpoint: dict[str, Any] = {
        "globalGateway": gateway.gateway_ref,
        "backendPort": backend_port,
        "globalHostTemplate": HOST_TEMPLATE,
    }
    if gateway_backend:
        endpoint["gatewayBackend"] = gateway_backend
    routing: dict[str, Any] = {"enabled": True}
    if probe is not None:
        routing["probe"] = probe
    config = {"routing": routing, "endpoint": endpoint}
    return {"ome": {"multicluster": {"enabled": True, "role": "control-plane", "config": config}}}


class Published:
    """One service placed on the servers' clusters, published through the gateway."""

    def __init__(
        self, gateway: SandboxedGateway, namespace: str, servers: dict[str, ClusterServer]
    ) -> None:
        self.gateway = gateway
        self.namespace = namespace
        self.servers = servers
        self.host = f"{ISVC}.{namespace}.global.example.com"
        self.port = next(iter(servers.values())).port
        self.controller: ControllerProcess | None = None

    @property
    def homes(self) -> dict[str, str]:
        return {cluster: f"http://{home_host(cluster)}:{self.port}" for cluster in self.servers}

    async def map_weights(self) -> dict[str, int]:
        tmap = await get_map(self.gateway.plane, ISVC, self.namespace)
        entries = ((tmap or {}).get("spec") or {}).get("entries") or []
        return {e["cluster"]: e.get("weight", 0) for e in entries}

    async def route(self) -> dict[str, Any]:
        result = await kubectl(
            self.gateway.plane, "get", "httproute", f"{ISVC}-global", "-n", self.namespace,
            "-o", "json", check=False,
        )  # fmt: skip
        return json.loads(result.stdout) if result.returncode == 0 else {}

    async def route_backends(self) -> dict[str, int]:
        """{Service: weight} of the route's backendRefs."""
        rules = (await self.route()).get("spec", {}).get("rules") or [{}]
        return {ref["name"]: ref.get("weight", 1) for ref in rules[0].get("backendRefs", [])}

    async def route_weights(self) -> list[int]:
        return list((await self.route_backends()).values())

    async def published(self) -> bool:
        tmap = await get_map(self.gateway.plane, ISVC, self.namespace)
        conditions = ((tmap or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Published" and c["status"] == "True" for c in conditions)

    async def serving(self, weights: dict[str, int]) -> None:
        """Wait until the map has `weights` ({cluster: weight}), the route has them in cluster
        order, and the gateway serves by them."""
        await until(self.map_weights, lambda w: w == weights, 60)
        want = [weights[c] for c in sorted(weights)]
        await until(self.route_weights, lambda w: w == want, 60)
        if isinstance(self.gateway, ContourGateway):
            backends = {n: w for n, w in (await self.route_backends()).items() if w}
            contour = self.gateway
            await until(
                lambda: _positive(contour.served_weights(self.host)), lambda w: w == backends, 60
            )
        elif sum(weights.values()):
            # Traefik applies a new route after its provider throttle: a window of
            # requests split exactly as weighted shows it serves the new one.
            window = 10 * sum(weights.values())
            await until(
                lambda: split(self.gateway, self.host, window),
                lambda s: s == exact_split(weights, window),
                60,
            )

    async def measure(self, requests: int) -> Counter[str]:
        return await split(self.gateway, self.host, requests)

    def check(self, served: Counter[str], weights: dict[str, int]) -> None:
        """The split is what the gateway promises for `weights`."""
        requests = sum(served.values())
        if isinstance(self.gateway, ContourGateway):
            assert split_is_plausible(served, weights), (served, weights)
        else:
            assert served == exact_split(weights, requests), (served, weights)


def exact_split(weights: dict[str, int], requests: int) -> Counter[str]:
    """A weighted round robin's counts over `requests` (a multiple of the weights' sum)."""
    total = sum(weights.values())
    return Counter({c: requests * w // total for c, w in weights.items() if w})


def _positive(weights: dict[str, int] | None) -> dict[str, int] | None:
    return None if weights is None else {n: w for n, w in weights.items() if w}


@contextlib.asynccontextmanager
async def publish(
    gateway: SandboxedGateway,
    namespace: str,
    servers: dict[str, ClusterServer],
    tmp_path: Path,
    probe: dict[str, Any] | None = None,
    **backend: Any,
) -> AsyncIterator[Published]:
    scene = Published(gateway, namespace, servers)
    plane = gateway.plane
    await kubectl(plane, "apply", "-f", "-", input=isvc_manifest(ISVC, namespace, FAST_POLL))
    await place(plane, ISVC, namespace, scene.homes, admitted=2, ready=2)
    controller = ControllerProcess(
        plane.kubeconfig,
        controller_values(gateway, scene.port, probe, **backend),
        tmp_path,
        lease=f"gw-{namespace}",
        namespace=namespace,
        wrap=gateway.sandbox.wrap,
    ).start()
    scene.controller = controller
    try:
        await controller.wait_started()
        await eventually(scene.published, 60, "the TrafficMap to be published")
        yield scene
    finally:
        await controller.stop()
