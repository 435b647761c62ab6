"""Hand-written Gateway API objects and helpers to send traffic through the gateway.

The builders write what a publisher would: a selector-less Service with a named port
`http` plus an FQDN EndpointSlice holding the home's host, or an ExternalName Service; and an
HTTPRoute on the Gateway with weighted backendRefs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from controller_harness import PATIENCE
from gw_clusters import tally

from ome_routing_dev.devcluster.gateway_base import SandboxedGateway

T = TypeVar("T")


def fqdn_backend(name: str, namespace: str, host: str, port: int) -> list[dict[str, Any]]:
    """A selector-less Service (port `http`) and an FQDN EndpointSlice holding `host`."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"name": "http", "port": port, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-fqdn",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "FQDN",
            "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        },
    ]


def external_name_backend(name: str, namespace: str, host: str, port: int) -> list[dict[str, Any]]:
    """An ExternalName Service, as OME's publisher writes its backends."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "ExternalName", "externalName": host, "ports": [{"port": port}]},
        }
    ]


def http_route(
    name: str,
    namespace: str,
    gateway: SandboxedGateway,
    hostname: str,
    backends: dict[str, int],
    port: int,
) -> dict[str, Any]:
    """An HTTPRoute on the gateway for `hostname`, one backendRef per Service at its weight."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": gateway.name,
                    "namespace": gateway.namespace,
                }
            ],
            "hostnames": [hostname],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {
                            "kind": "Service",
                            "name": svc,
                            "namespace": namespace,
                            "port": port,
                            "weight": weight,
                        }
                        for svc, weight in sorted(backends.items())
                    ],
                }
            ],
        },
    }


async def apply(gateway: SandboxedGateway, objects: list[dict[str, Any]]) -> None:
    document = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    await asyncio.to_thread(gateway.plane.kubectl, "apply", "-f", "-", input=document)


async def route_condition(
    gateway: SandboxedGateway, namespace: str, name: str, type_: str
) -> dict[str, Any]:
    """The route's condition `type_` as the gateway's parent status reports it ({} when none)."""
    result = await asyncio.to_thread(
        gateway.plane.kubectl, "get", "httproute", name, "-n", namespace, "-o", "json"
    )
    for parent in json.loads(result.stdout).get("status", {}).get("parents", []):
        for condition in parent.get("conditions", []):
            if condition.get("type") == type_:
                return dict(condition)
    return {}


async def eventually(
    probe: Callable[[], Any], accept: Callable[[T], bool], timeout: float = PATIENCE
) -> T:
    """Call `probe` (sync or async) until `accept` holds for its value; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if asyncio.iscoroutine(value):
            value = await value
        if accept(value):
            return value  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout:.0f}s")
        await asyncio.sleep(0.2)


async def send(gateway: SandboxedGateway, host: str, count: int) -> list[tuple[int, str]]:
    """`count` GETs through the gateway, one after another: [(status, body)]; a refused
    connection is (0, "connection refused") (Envoy opens its listener with the first route
    Contour gives it)."""

    def get() -> tuple[int, str]:
        try:
            return gateway.get(host)
        except ConnectionRefusedError:
            return 0, "connection refused"

    return await asyncio.to_thread(lambda: [get() for _ in range(count)])


async def split(gateway: SandboxedGateway, host: str, count: int) -> Counter[str]:
    """How many of `count` requests each cluster served."""
    answers = await send(gateway, host, count)
    assert all(status == 200 for status, _ in answers), Counter(s for s, _ in answers)
    return tally([body for _, body in answers])
