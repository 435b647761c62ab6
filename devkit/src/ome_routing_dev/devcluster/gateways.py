"""The local gateways by name, for `--gateway traefik|contour`.

| name      | implementation             | OME's default ExternalName backends | publisher mode           |
|-----------|----------------------------|-------------------------------------|--------------------------|
| `traefik` | Traefik v3.6 (one process) | refused                             | hostname EndpointSlices  |
| `contour` | Contour v1.33 + Envoy 1.38 | served (`enableExternalNameService`) | OME's default            |
"""

from __future__ import annotations

from pathlib import Path

from ome_routing_dev.devcluster.gateway import LocalGateway
from ome_routing_dev.devcluster.gateway_base import SandboxedGateway
from ome_routing_dev.devcluster.gateway_contour import ContourGateway
from ome_routing_dev.devcluster.gateway_tools import (
    ensure_contour,
    ensure_contour_crds,
    ensure_traefik,
    envoy_binary,
)
from ome_routing_dev.devcluster.tools import Progress

GATEWAYS: dict[str, type[SandboxedGateway]] = {
    LocalGateway.kind: LocalGateway,
    ContourGateway.kind: ContourGateway,
}
GATEWAY_NAMES = tuple(GATEWAYS)


def gateway_type(name: str) -> type[SandboxedGateway]:
    """The gateway class named `name` (`traefik`, `contour`)."""
    try:
        return GATEWAYS[name]
    except KeyError:
        raise ValueError(f"unknown gateway {name!r} (known: {', '.join(GATEWAY_NAMES)})") from None


def ensure_gateway_binaries(name: str, progress: Progress | None = None) -> dict[str, Path]:
    """The binaries a gateway runs, built or found once: {program: path}."""
    if name == LocalGateway.kind:
        return {"traefik": ensure_traefik(progress)}
    gateway_type(name)
    return {
        "contour": ensure_contour(progress),
        "contour-crds": ensure_contour_crds(progress),
        "envoy": envoy_binary(),
    }
