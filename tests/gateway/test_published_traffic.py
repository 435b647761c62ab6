"""Real requests through each gateway follow the TrafficMap the controller publishes.

Every test runs against Traefik (the publisher in our hostname-EndpointSlice mode) and
Contour + Envoy (the publisher in OME's default mode: ExternalName backends). The
controller runs inside the gateway's name sandbox (its capacity polls and probes resolve the
homes' hostnames there). Each workload cluster is a stand-in on its own 127.x.y.z address
serving the model (`served by <cluster>`), the capacity Report and the health path; the
global host is requested through the gateway. Traefik's counts are exact (its weighted round
robin is deterministic); Envoy's are checked by the binomial test of `gw_stats` (a false
failure at most once in a million checks).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from controller_harness import kubectl
from gw_clusters import StartServers, home_host
from gw_objects import eventually as until
from gw_objects import send
from gw_published import ISVC, Published, publish
from tests.probe_spec import guide_probe

from ome_routing_dev.devcluster.gateway_base import SandboxedGateway
from ome_routing_dev.devcluster.gateway_names import namespace_file

pytestmark = pytest.mark.timeout(240)

REQUESTS = 300
#: Each gateway's own answer to a route whose weights are all zero.
ALL_ZERO = {"traefik": (503, "no available server\n"), "contour": (500, "")}


@pytest.fixture
async def published(
    gateway: SandboxedGateway,
    gateway_namespace: str,
    cluster_servers: StartServers,
    tmp_path: Path,
) -> AsyncIterator[Published]:
    """The service on worker-a (servable 2) and worker-b (servable 1): weights 2:1."""
    servers = await cluster_servers(["worker-a", "worker-b"])
    servers["worker-a"].servable, servers["worker-b"].servable = 2, 1
    async with publish(gateway, gateway_namespace, servers, tmp_path) as scene:
        yield scene


async def test_requests_split_by_the_published_weights(published: Published) -> None:
    """Ceilings 2 and 1 give weights 2:1; 300 requests through the gateway split 2:1."""
    weights = {"worker-a": 2, "worker-b": 1}
    await published.serving(weights)
    served = await published.measure(REQUESTS)
    published.check(served, weights)


async def test_the_split_follows_a_reporter_change(published: Published) -> None:
    await published.serving({"worker-a": 2, "worker-b": 1})
    published.servers["worker-a"].servable = 1
    weights = {"worker-a": 1, "worker-b": 1}
    await published.serving(weights)
    published.check(await published.measure(REQUESTS), weights)


async def test_a_drained_home_gets_no_request(published: Published) -> None:
    await published.serving({"worker-a": 2, "worker-b": 1})
    drain = json.dumps({"maint-1": {"cluster": "worker-a", "reason": "disk swap"}})
    await kubectl(
        published.gateway.plane, "annotate", "--overwrite", "isvc", ISVC,
        "-n", published.namespace, f"ome.io/traffic-drain={drain}",
    )  # fmt: skip
    await published.serving({"worker-a": 0, "worker-b": 1})
    before = published.servers["worker-a"].served
    assert await published.measure(100) == {"worker-b": 100}
    assert published.servers["worker-a"].served == before


async def test_a_probe_gated_home_gets_no_request(
    gateway: SandboxedGateway,
    gateway_namespace: str,
    cluster_servers: StartServers,
    tmp_path: Path,
) -> None:
    """The guide's probe, fast: worker-a's health path answers 503, its gate closes."""
    servers = await cluster_servers(["worker-a", "worker-b"])
    servers["worker-a"].servable, servers["worker-b"].servable = 2, 1
    probe = guide_probe(period="1s", timeout="500ms")
    async with publish(gateway, gateway_namespace, servers, tmp_path, probe) as scene:
        await scene.serving({"worker-a": 2, "worker-b": 1})
        servers["worker-a"].health = 503
        await scene.serving({"worker-a": 0, "worker-b": 1})
        before = servers["worker-a"].served
        assert await scene.measure(100) == {"worker-b": 100}
        assert servers["worker-a"].served == before
        servers["worker-a"].health = 200
        weights = {"worker-a": 2, "worker-b": 1}
        await scene.serving(weights)
        scene.check(await scene.measure(REQUESTS), weights)


async def test_all_zero_weights_give_the_gateways_own_answer(published: Published) -> None:
    """Traefik answers 503 `no available server`; Contour programs Envoy to answer 500."""
    for server in published.servers.values():
        server.servable = 0
    await published.serving({"worker-a": 0, "worker-b": 0})
    expected = ALL_ZERO[published.gateway.kind]
    answers = await until(
        lambda: send(published.gateway, published.host, 1), lambda a: a[0][0] == expected[0]
    )
    assert answers == [expected]
    before = {c: s.served for c, s in published.servers.items()}
    await send(published.gateway, published.host, 20)
    assert {c: s.served for c, s in published.servers.items()} == before


async def test_no_dns_query_left_the_machine(published: Published) -> None:
    """The controller and the gateway resolve the homes from the sandbox's hosts file."""
    scene = published
    controller = scene.controller
    assert controller is not None
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
