"""What each gateway does with OME's per-backend options, as the real publisher writes them.

- `gatewayBackend.rewriteHostname: true`: a `URLRewrite` filter on each backendRef setting
  `Host` to the home's host. Neither gateway applies it: Traefik v3.6 accepts the route and
  sends the client's `Host`; Contour v1.33 marks the route `Accepted=False`
  (`UnsupportedValue`: only header modifiers are supported on a backendRef) and still
  programs it, without the rewrite.
- `gatewayBackend.tls: {enabled: true, wellKnownCACertificates: System}`: a
  BackendTLSPolicy (v1) per backend Service. Traefik accepts it and speaks TLS to the home
  (to the plain-HTTP stand-in: 500, `tls: first record does not look like a TLS
  handshake`); Contour does not read BackendTLSPolicy v1 (it is off, see
  `gateway_contour`), so the policy has no status and the home is reached in plain HTTP.

The stand-in records the `Host` of every request it answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from controller_harness import kubectl
from gw_clusters import StartServers
from gw_objects import eventually, route_condition, send
from gw_published import ISVC, Published, publish

from ome_routing_dev.devcluster.gateway_base import SandboxedGateway

pytestmark = pytest.mark.timeout(240)

TLS = {"enabled": True, "wellKnownCACertificates": "System"}
CONTOUR_FILTERS = (
    "HTTPRoute.Spec.Rules.BackendRef.Filters: "
    "Only RequestHeaderModifier and ResponseHeaderModifier type is supported."
)
TRAEFIK_TLS_TO_PLAIN_HTTP = 'error="tls: first record does not look like a TLS handshake"'


async def published_on_one_home(
    gateway: SandboxedGateway, namespace: str, cluster_servers: StartServers, tmp_path: Path,
    **backend: Any,
) -> Any:  # fmt: skip
    servers = await cluster_servers(["worker-a"])
    return publish(gateway, namespace, servers, tmp_path, **backend)


async def answers(scene: Published, count: int) -> list[tuple[int, str]]:
    """`count` answers once the gateway serves the route (anything but its 404)."""
    await eventually(lambda: send(scene.gateway, scene.host, 1), lambda a: a[0][0] != 404)
    return await send(scene.gateway, scene.host, count)


async def accepted(scene: Published) -> tuple[str, str, str]:
    condition = await eventually(
        lambda: route_condition(scene.gateway, scene.namespace, f"{ISVC}-global", "Accepted"),
        bool,
    )
    return condition["status"], condition["reason"], condition["message"]


async def test_no_gateway_applies_rewrite_hostname(
    gateway: SandboxedGateway, gateway_namespace: str, cluster_servers: StartServers, tmp_path: Path
) -> None:
    context = await published_on_one_home(
        gateway, gateway_namespace, cluster_servers, tmp_path, rewriteHostname=True
    )
    async with context as scene:
        route = await scene.route()
        filters = route["spec"]["rules"][0]["backendRefs"][0]["filters"]
        assert filters[0]["type"] == "URLRewrite"
        assert await answers(scene, 10) == [(200, "served by worker-a")] * 10
        condition = await accepted(scene)
        seen = set(scene.servers["worker-a"].hosts_seen)
    assert seen == {scene.host}  # the client's Host, not the home's
    if gateway.kind == "contour":
        assert condition == ("False", "UnsupportedValue", CONTOUR_FILTERS)
    else:
        assert condition[:2] == ("True", "Accepted")


async def test_tls_is_spoken_by_traefik_and_ignored_by_contour(
    gateway: SandboxedGateway, gateway_namespace: str, cluster_servers: StartServers, tmp_path: Path
) -> None:
    context = await published_on_one_home(
        gateway, gateway_namespace, cluster_servers, tmp_path, tls=TLS
    )
    async with context as scene:
        got = await answers(scene, 5)
        policies = await kubectl(
            gateway.plane, "get", "backendtlspolicy", "-n", gateway_namespace, "-o", "json"
        )
        statuses = [p.get("status") or {} for p in json.loads(policies.stdout)["items"]]
        served = scene.servers["worker-a"].served
    assert len(statuses) == 1
    if gateway.kind == "contour":
        assert statuses == [{}]  # not read
        assert got == [(200, "served by worker-a")] * 5
    else:
        (ancestor,) = statuses[0]["ancestors"]
        assert ancestor["controllerName"] == "traefik.io/gateway-controller"
        assert {c["type"]: c["status"] for c in ancestor["conditions"]}["Accepted"] == "True"
        assert got == [(500, "Internal Server Error")] * 5
        assert served == 0
        assert TRAEFIK_TLS_TO_PLAIN_HTTP in gateway.log()
