"""A real Gateway API implementation on the local control plane: Traefik, on loopback.

    with LocalControlPlane(gateway_api=True) as plane:
        with LocalGateway(plane, {"chat.prod.worker-a.example.com": "127.0.0.2"}) as gateway:
            gateway.gateway_ref     # "ome-gateway/global", for endpoint.globalGateway
            gateway.get("chat.prod.global.example.com", "/")   # through the gateway

`start()` installs the Gateway API CRDs (when missing), a GatewayClass for Traefik and a
Gateway with one HTTP listener, then runs Traefik with its Kubernetes Gateway provider
reading the control plane through its admin kubeconfig. Traefik's entry point listens on
127.0.0.1 at the listener's port (Traefik serves a listener on the entry point whose port
equals it). Its update check and anonymous usage report are off: their defaults contact
the internet. Traefik runs in a `NameSandbox` (see `gateway_base`): the workload clusters'
hostnames resolve from a private hosts file to loopback addresses, and any DNS query goes
to the sandbox's recorder. Traefik refuses ExternalName backends, so the publisher writes
hostname EndpointSlices for it. `gateway_contour.ContourGateway` is the other gateway.

It never binds or connects to anything but loopback. Needs root (the mount namespace, port 53).

Errors: `GatewayError` (Traefik did not start or the Gateway was not programmed; the message
carries Traefik's log). `ToolsError` comes from building Traefik, `ControlPlaneError` from
kubectl.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ome_routing_dev.devcluster.gateway_base import GatewayError, SandboxedGateway
from ome_routing_dev.devcluster.gateway_tools import ensure_traefik, install_gateway_api_crds

__all__ = ["ENTRY_POINT", "GATEWAY_CLASS", "TRAEFIK_CONTROLLER", "GatewayError", "LocalGateway"]

GATEWAY_CLASS = "traefik"
#: Traefik's Kubernetes Gateway provider serves GatewayClasses with this controllerName.
TRAEFIK_CONTROLLER = "traefik.io/gateway-controller"
ENTRY_POINT = "web"


class LocalGateway(SandboxedGateway):
    """Traefik serving one Gateway of the local control plane; see the module docstring."""

    kind = "traefik"
    title = "Traefik"
    gateway_class = GATEWAY_CLASS
    controller_name = TRAEFIK_CONTROLLER
    needs_hostname_endpoint_slices = True
    data_plane = "traefik"

    def __init__(self, *args: Any, traefik: Path | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._traefik = traefik

    def _prepare(self) -> None:
        self._traefik = self._traefik or ensure_traefik()

    def _install_crds(self) -> None:
        install_gateway_api_crds(self.plane.kubectl, self.plane.wait_established)

    def _launch(self) -> None:
        assert self._traefik is not None
        env = {"KUBECONFIG": str(self.plane.kubeconfig)}
        self._spawn("traefik", [str(self._traefik), *self.traefik_args()], env)

    def traefik_args(self) -> list[str]:
        """Traefik's flags: one entry point, the Gateway provider, nothing phoning home."""
        return [
            "--global.checkNewVersion=false",
            "--global.sendAnonymousUsage=false",
            f"--entryPoints.{ENTRY_POINT}.address=127.0.0.1:{self.port}",
            "--providers.kubernetesgateway=true",
            "--providers.kubernetesgateway.statusAddress.ip=127.0.0.1",
            "--log.level=INFO",
            "--log.noColor=true",
        ]
