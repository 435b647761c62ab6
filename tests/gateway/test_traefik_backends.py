"""What Traefik v3.6 does with each kind of backend a publisher can write, by hand-written objects.

These pin the facts the publisher's hostname-EndpointSlice mode relies on: an FQDN
EndpointSlice behind a selector-less Service is served (Traefik dials the hostname, resolved
in its private namespace), weights split the traffic, an all-zero route answers 503
`no available server`, and an ExternalName Service is refused.
"""

from __future__ import annotations

import pytest
from gw_clusters import StartServers, home_host
from gw_objects import (
    apply,
    eventually,
    external_name_backend,
    fqdn_backend,
    http_route,
    route_condition,
    send,
    split,
)

from ome_routing_dev.devcluster.gateway import LocalGateway
from ome_routing_dev.devcluster.gateway_names import namespace_file

EXTERNAL_NAME_REFUSED = "type ExternalName is not supported for Kubernetes Service reference"


@pytest.fixture
def gateway(traefik: LocalGateway) -> LocalGateway:
    """These tests are about Traefik (the FQDN EndpointSlices it needs)."""
    return traefik


async def _route_to_fqdn_backends(
    gateway: LocalGateway,
    namespace: str,
    cluster_servers: StartServers,
    weights: dict[str, int],
) -> str:
    servers = await cluster_servers(sorted(weights))
    port = next(iter(servers.values())).port
    objects = []
    for cluster in weights:
        objects += fqdn_backend(f"tmb-{cluster}", namespace, home_host(cluster), port)
    host = f"chat.{namespace}.global.example.com"
    backends = {f"tmb-{cluster}": weight for cluster, weight in weights.items()}
    objects.append(http_route("chat-global", namespace, gateway, host, backends, port))
    await apply(gateway, objects)
    accepted = await eventually(
        lambda: route_condition(gateway, namespace, "chat-global", "ResolvedRefs"),
        lambda c: c.get("status") == "True",
    )
    assert accepted["reason"] == "ResolvedRefs"
    return host


async def test_fqdn_endpoint_slices_split_requests_by_weight(
    gateway: LocalGateway, gateway_namespace: str, cluster_servers: StartServers
) -> None:
    """Traefik dials the FQDN of each slice; 2:1 weights give exactly 2:1 over 300 requests."""
    host = await _route_to_fqdn_backends(
        gateway, gateway_namespace, cluster_servers, {"worker-a": 2, "worker-b": 1}
    )
    await eventually(lambda: send(gateway, host, 1), lambda a: a[0][0] == 200)
    # Traefik can serve the route before it has both slices (its provider throttles
    # reloads): wait for the 2:1 split itself, then count
    await eventually(
        lambda: split(gateway, host, 30), lambda s: s == {"worker-a": 20, "worker-b": 10}
    )
    served = await split(gateway, host, 300)
    assert served == {"worker-a": 200, "worker-b": 100}


async def test_a_weight_of_zero_takes_a_backend_out(
    gateway: LocalGateway, gateway_namespace: str, cluster_servers: StartServers
) -> None:
    host = await _route_to_fqdn_backends(
        gateway, gateway_namespace, cluster_servers, {"worker-a": 0, "worker-b": 1}
    )
    await eventually(lambda: send(gateway, host, 1), lambda a: a[0][0] == 200)
    assert await split(gateway, host, 30) == {"worker-b": 30}


async def test_all_zero_weights_answer_503_no_available_server(
    gateway: LocalGateway, gateway_namespace: str, cluster_servers: StartServers
) -> None:
    host = await _route_to_fqdn_backends(
        gateway, gateway_namespace, cluster_servers, {"worker-a": 0, "worker-b": 0}
    )
    answers = await eventually(lambda: send(gateway, host, 1), lambda a: a[0][0] != 404)
    assert answers == [(503, "no available server\n")]


async def test_an_external_name_service_is_refused(
    gateway: LocalGateway, gateway_namespace: str, cluster_servers: StartServers
) -> None:
    """OME's default backend: Traefik refuses it, reports why on the route, and answers 500."""
    servers = await cluster_servers(["worker-a"])
    port = servers["worker-a"].port
    host = f"chat.{gateway_namespace}.global.example.com"
    objects = external_name_backend("tmb-worker-a", gateway_namespace, home_host("worker-a"), port)
    objects.append(
        http_route("chat-global", gateway_namespace, gateway, host, {"tmb-worker-a": 1}, port)
    )
    await apply(gateway, objects)
    refused = await eventually(
        lambda: route_condition(gateway, gateway_namespace, "chat-global", "ResolvedRefs"),
        lambda c: c.get("status") == "False",
    )
    assert EXTERNAL_NAME_REFUSED in refused["message"]
    answers = await eventually(lambda: send(gateway, host, 1), lambda a: a[0][0] != 404)
    assert answers[0][0] == 500
    assert servers["worker-a"].served == 0


async def test_the_gateway_resolves_homes_from_its_private_hosts_file_only(
    gateway: LocalGateway, gateway_namespace: str, cluster_servers: StartServers
) -> None:
    """Inside Traefik's mount namespace, /etc/hosts is ours and resolv.conf names the recorder."""
    host = await _route_to_fqdn_backends(
        gateway, gateway_namespace, cluster_servers, {"worker-a": 1}
    )
    await eventually(lambda: send(gateway, host, 1), lambda a: a[0][0] == 200)
    home = home_host("worker-a")
    hosts = namespace_file(gateway.pid, "/etc/hosts")
    assert f"{gateway.sandbox.hosts[home]}\t{home}" in hosts.splitlines()
    resolv = namespace_file(gateway.pid, "/etc/resolv.conf")
    nameservers = [line.split()[1] for line in resolv.splitlines() if line.startswith("nameserver")]
    assert nameservers == [gateway.sandbox.recorder.address]
    assert [q for q in gateway.sandbox.recorder.queries if q.name == home] == []
