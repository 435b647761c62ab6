"""Fixtures for real traffic through real Gateway API implementations on loopback.

- `gateway_plane` (session): a `LocalControlPlane` with our CRDs and the Gateway API's, on
  tests/plane_fixtures.py's `tools`.
- `traefik` (session): a `LocalGateway` (Traefik) serving the Gateway `ome-gateway/global` of
  that control plane, in a private mount namespace whose hosts file the tests extend.
- `contour` (session): a `ContourGateway` (Contour + Envoy) serving `ome-gateway/contour` of
  the same control plane, in a sandbox of its own with the same names.
- `gateway`: each of the two in turn (a test using it runs once per gateway, its id
  `[traefik]` or `[contour]`); started once per session, on first use.
- `fleet` (session): loopback addresses for workload clusters, one per cluster.
- `cluster_servers`: a factory of started `ClusterServer`s (model server + capacity reporter)
  for one test, each on its cluster's address and hostname (mapped in both gateways' hosts
  files from the start) at a port shared by the test's clusters; stopped after the test.
- `gateway_namespace`: a fresh namespace for one test, deleted afterwards.

Every test under tests/gateway is marked `gateway`. They need root (a mount namespace, and
UDP port 53 on a 127.x address for the DNS recorder).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from controller_harness import delete_namespace
from gw_clusters import ClusterServer, Fleet, StartServers, home_host
from tests.plane_fixtures import prepare_tools
from tests.plane_fixtures import tools as tools
from tests.suite_hooks import Progress, register

from ome_routing_dev.devcluster import LocalControlPlane, Tools
from ome_routing_dev.devcluster.gateway import LocalGateway
from ome_routing_dev.devcluster.gateway_base import SandboxedGateway
from ome_routing_dev.devcluster.gateway_contour import ContourGateway
from ome_routing_dev.devcluster.gateway_tools import ensure_gateway_api_crds, ensure_traefik
from ome_routing_dev.devcluster.gateways import ensure_gateway_binaries
from ome_routing_dev.devcluster.processes import free_ports

GATEWAY_DIR = Path(__file__).parent


def _prepare(progress: Progress) -> None:
    """The control plane's binaries, Traefik, Contour and the CRDs (a first build takes
    minutes)."""
    prepare_tools(progress)
    ensure_traefik(progress=progress)
    ensure_gateway_api_crds(progress=progress)
    ensure_gateway_binaries(ContourGateway.kind, progress=progress)


register(GATEWAY_DIR, ["gateway"], _prepare)


@pytest.fixture(scope="session")
def gateway_plane(tools: Tools) -> Iterator[LocalControlPlane]:
    with LocalControlPlane(tools=tools, gateway_api=True) as plane:
        yield plane


@pytest.fixture(scope="session")
def traefik(gateway_plane: LocalControlPlane, fleet: Fleet) -> Iterator[LocalGateway]:
    with LocalGateway(gateway_plane, fleet.hosts()) as running:
        yield running


@pytest.fixture(scope="session")
def contour(gateway_plane: LocalControlPlane, fleet: Fleet) -> Iterator[ContourGateway]:
    with ContourGateway(gateway_plane, fleet.hosts(), name="contour") as running:
        yield running


@pytest.fixture(params=[LocalGateway.kind, ContourGateway.kind])
def gateway(request: pytest.FixtureRequest) -> SandboxedGateway:
    """Each gateway in turn: Traefik, then Contour."""
    running: SandboxedGateway = request.getfixturevalue(request.param)
    return running


@pytest.fixture(scope="session")
def fleet() -> Fleet:
    return Fleet()


@pytest.fixture
async def gateway_namespace(gateway_plane: LocalControlPlane) -> AsyncIterator[str]:
    created = await asyncio.to_thread(
        gateway_plane.kubectl,
        "create",
        "-o",
        "jsonpath={.metadata.name}",
        "-f",
        "-",
        input='{"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": "gw-"}}',
    )
    name = created.stdout.strip()
    try:
        yield name
    finally:
        await asyncio.to_thread(delete_namespace, gateway_plane, name)


@pytest.fixture
async def cluster_servers(fleet: Fleet) -> AsyncIterator[StartServers]:
    """`await cluster_servers(["worker-a", "worker-b"])` -> {cluster: server}."""
    started: list[ClusterServer] = []

    async def start(clusters: list[str]) -> dict[str, ClusterServer]:
        # One port for all of them: a backend port is one number for every home of a route.
        (port,) = free_ports(1)
        servers = {
            c: await ClusterServer(c, fleet.address(c), port, home_host(c)).start()
            for c in clusters
        }
        started.extend(servers.values())
        return servers

    try:
        yield start
    finally:
        for server in started:
            await server.stop()
