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
the internet. Traefik runs in a `NameSandbox`: the workload clusters' hostnames resolve from a
private hosts file to loopback addresses, and any DNS query goes to the sandbox's recorder.

It never binds or connects to anything but loopback. Needs root (the mount namespace, port 53).

Errors: `GatewayError` (Traefik did not start or the Gateway was not programmed; the message
carries Traefik's log). `ToolsError` comes from building Traefik, `ControlPlaneError` from
kubectl.
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from ome_routing.devcluster import processes
from ome_routing.devcluster.controlplane import LocalControlPlane
from ome_routing.devcluster.gateway_names import NameSandbox
from ome_routing.devcluster.gateway_tools import ensure_traefik, install_gateway_api_crds

GATEWAY_CLASS = "traefik"
#: Traefik's Kubernetes Gateway provider serves GatewayClasses with this controllerName.
TRAEFIK_CONTROLLER = "traefik.io/gateway-controller"
ENTRY_POINT = "web"
_IN_CLUSTER = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
_PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class GatewayError(RuntimeError):
    """The gateway did not start, or was not programmed in time."""


class LocalGateway:
    """Traefik serving one Gateway of the local control plane; see the module docstring."""

    def __init__(
        self,
        plane: LocalControlPlane,
        hosts: Mapping[str, str],
        *,
        dir: Path | None = None,
        namespace: str = "ome-gateway",
        name: str = "global",
        port: int | None = None,
        traefik: Path | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.name = name
        self._dir_given = dir is not None
        self._dir = Path(dir) if dir is not None else None
        self._hosts = dict(hosts)
        self._port = port
        self._traefik = traefik
        self._startup_timeout = startup_timeout
        self._sandbox: NameSandbox | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._process: processes.ProcessId | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        traefik = self._traefik = self._traefik or ensure_traefik()
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="ome-routing-gateway-"))
        self._dir.mkdir(parents=True, exist_ok=True)
        self._port = self._port or processes.free_ports(1)[0]
        try:
            install_gateway_api_crds(self.plane.kubectl, self.plane.wait_established)
            self.plane.kubectl("apply", "-f", "-", input=self.manifests())
            self._sandbox = NameSandbox(self._dir / "names", self._hosts).start()
            argv = self._sandbox.wrap([*self._environment(), str(traefik), *self.traefik_args()])
            self._child = processes.spawn("traefik", argv, self.log_path, outlive_parent=False)
            self._process = processes.identify("traefik", self._child)
            self._wait_programmed()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._process is not None:
            processes.terminate(self._process, grace=10.0, child=self._child)
            self._process = self._child = None
        if self._sandbox is not None:
            self._sandbox.stop()
        if self._dir is not None and not self._dir_given:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what callers use -----------------------------------------------------------------

    @property
    def port(self) -> int:
        """The Gateway listener's port, and Traefik's entry point on 127.0.0.1."""
        if self._port is None:
            raise GatewayError("the gateway has no port before start()")
        return self._port

    @property
    def gateway_ref(self) -> str:
        """`namespace/name` of the Gateway, as `endpoint.globalGateway` spells it."""
        return f"{self.namespace}/{self.name}"

    @property
    def sandbox(self) -> NameSandbox:
        if self._sandbox is None:
            raise GatewayError("the gateway has no name sandbox before start()")
        return self._sandbox

    @property
    def pid(self) -> int:
        if self._process is None:
            raise GatewayError("the gateway is not running")
        return self._process.pid

    @property
    def log_path(self) -> Path:
        if self._dir is None:
            raise GatewayError("the gateway has no directory before start()")
        return self._dir / "traefik.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

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

    def manifests(self) -> str:
        """The namespace, the GatewayClass and the Gateway, as JSON documents for kubectl."""
        documents = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}},
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": {"name": GATEWAY_CLASS},
                "spec": {"controllerName": TRAEFIK_CONTROLLER},
            },
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "gatewayClassName": GATEWAY_CLASS,
                    "listeners": [
                        {
                            "name": "http",
                            "protocol": "HTTP",
                            "port": self.port,
                            "allowedRoutes": {"namespaces": {"from": "All"}},
                        }
                    ],
                },
            },
        ]
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": documents})

    def add_hosts(self, hosts: Mapping[str, str]) -> None:
        """Map more workload-cluster names to loopback addresses.

        Traefik (Go's resolver) reads /etc/hosts again at most every 5 seconds: until then a
        new name is asked of DNS (the sandbox's recorder, which refuses it). Names known
        before `start()` are better given to the constructor.
        """
        self.sandbox.add_hosts(hosts)

    def get(self, host: str, path: str = "/", timeout: float = 10.0) -> tuple[int, str]:
        """One GET through the gateway with `Host: host`: (status, body)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request("GET", path, headers={"Host": host, "Connection": "close"})
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            connection.close()

    def gateway_status(self) -> dict[str, Any]:
        result = self.plane.kubectl(
            "get", "gateway", self.name, "-n", self.namespace, "-o", "json", check=False
        )
        if result.returncode != 0:
            return {}
        status: dict[str, Any] = json.loads(result.stdout).get("status") or {}
        return status

    # -- internals --------------------------------------------------------------------------

    def _environment(self) -> list[str]:
        # Traefik reads the kubeconfig named by KUBECONFIG unless it finds in-cluster variables;
        # a proxy from the environment must never see the workload clusters' hostnames.
        unset = [*_IN_CLUSTER, *(p for name in _PROXIES for p in (name, name.upper()))]
        return [
            "env",
            *(a for name in unset for a in ("-u", name)),
            f"KUBECONFIG={self.plane.kubeconfig}",
        ]

    def _wait_programmed(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if self._child is not None and self._child.poll() is not None:
                raise GatewayError(
                    f"traefik exited with status {self._child.returncode} while starting; "
                    f"the end of {self.log_path}:\n{processes.tail(self.log_path)}"
                )
            conditions = self.gateway_status().get("conditions") or []
            programmed = any(
                isinstance(c, dict) and c.get("type") == "Programmed" and c.get("status") == "True"
                for c in conditions
            )
            if programmed and processes.port_is_listening(self.port):
                return
            time.sleep(0.2)
        raise GatewayError(
            f"Gateway {self.gateway_ref} was not programmed by Traefik after "
            f"{self._startup_timeout:.0f}s; the end of {self.log_path}:\n"
            f"{processes.tail(self.log_path)}"
        )
