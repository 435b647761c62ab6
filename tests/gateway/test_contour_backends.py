"""What Contour v1.33 + Envoy do with OME's default backends, by hand-written objects.

An ExternalName Service is served (`enableExternalNameService: true`): Envoy resolves its
host in its private namespace (the hosts file, never DNS) and dials it. Contour refuses an
externalName that is `localhost` or a loopback literal, which is why the workload clusters
have made-up hostnames mapped to 127.x.y.z addresses (a loopback literal such as 127.0.0.1
is accepted by Contour v1.33: it refuses only the names `localhost`,
`localhost.localdomain` and `local.projectcontour.io`).
"""

from __future__ import annotations

import pytest
from gw_clusters import StartServers, home_host
from gw_objects import (
    apply,
    eventually,
    external_name_backend,
    http_route,
    route_condition,
    send,
)

from ome_routing_dev.devcluster.gateway_contour import ContourGateway
from ome_routing_dev.devcluster.gateway_names import namespace_file


@pytest.fixture
def gateway(contour: ContourGateway) -> ContourGateway:
    return contour


@pytest.mark.parametrize("external_name", ["localhost", "localhost.localdomain"])
async def test_an_external_name_of_localhost_is_refused(
    gateway: ContourGateway, gateway_namespace: str, cluster_servers: StartServers,
    external_name: str,
) -> None:  # fmt: skip
    servers = await cluster_servers(["worker-a"])
    port = servers["worker-a"].port
    host = f"chat.{gateway_namespace}.global.example.com"
    objects = external_name_backend("tmb-worker-a", gateway_namespace, external_name, port)
    objects.append(
        http_route("chat-global", gateway_namespace, gateway, host, {"tmb-worker-a": 1}, port)
    )
    await apply(gateway, objects)
    refused = await eventually(
        lambda: route_condition(gateway, gateway_namespace, "chat-global", "ResolvedRefs"),
        lambda c: c.get("status") == "False",
    )
    assert refused["reason"] == "BackendNotFound"
    assert refused["message"] == (
        f'service "tmb-worker-a" is invalid: {gateway_namespace}/tmb-worker-a is an '
        "ExternalName service that points to localhost, this is not allowed"
    )
    assert await send(gateway, host, 1) != [(200, "served by worker-a")]
    assert servers["worker-a"].served == 0


async def test_the_gateway_resolves_homes_from_its_private_hosts_file_only(
    gateway: ContourGateway, gateway_namespace: str, cluster_servers: StartServers
) -> None:
    """Inside Envoy's mount namespace, /etc/hosts is ours and resolv.conf names the recorder."""
    servers = await cluster_servers(["worker-a"])
    port = servers["worker-a"].port
    home = home_host("worker-a")
    host = f"chat.{gateway_namespace}.global.example.com"
    objects = external_name_backend("tmb-worker-a", gateway_namespace, home, port)
    objects.append(
        http_route("chat-global", gateway_namespace, gateway, host, {"tmb-worker-a": 1}, port)
    )
    await apply(gateway, objects)
    assert await eventually(lambda: send(gateway, host, 1), lambda a: a[0][0] == 200) == [
        (200, "served by worker-a")
    ]
    for pid in gateway.pids.values():
        hosts = namespace_file(pid, "/etc/hosts")
        assert f"{gateway.sandbox.hosts[home]}\t{home}" in hosts.splitlines()
        resolv = namespace_file(pid, "/etc/resolv.conf")
        nameservers = [ln.split()[1] for ln in resolv.splitlines() if ln.startswith("nameserver")]
        assert nameservers == [gateway.sandbox.recorder.address]
    assert [q for q in gateway.sandbox.recorder.queries if q.name == home] == []
