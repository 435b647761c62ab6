"""What the local gateways share: a Gateway on the control plane, served on loopback from a sandbox.

A `SandboxedGateway` applies a namespace, a GatewayClass and a Gateway with one HTTP
listener, starts its processes (a subclass's `_launch`) inside a `NameSandbox` (a private
mount namespace whose /etc/hosts maps the workload clusters' hostnames to loopback
addresses and whose resolv.conf names a local recorder), and waits until the Gateway is
`Programmed` and the data plane accepts connections on `port` (127.0.0.1). Clients send
requests to `port` with the route's host in `Host` (`get`).

Started with `detached=True` (`ome-routing dev up --gateway ...`) the processes outlive this
one, their ids are written to `gateway.json` in the gateway's folder, and
`attach(dir).stop()` ends them later. No recorder outlives this process, so a detached
sandbox's resolv.conf names a loopback address that nothing listens on: a query is refused
by the kernel, and still reaches no resolver.

Errors: `GatewayError` (a process did not start or the Gateway was not programmed; the
message carries the end of the logs).
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

from ome_routing_dev.devcluster import processes
from ome_routing_dev.devcluster.controlplane import LocalControlPlane
from ome_routing_dev.devcluster.gateway_names import NameSandbox

STATE_FILE = "gateway.json"
_IN_CLUSTER = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
_PROXIES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class GatewayError(RuntimeError):
    """The gateway did not start, or was not programmed in time."""


class SandboxedGateway:
    """One Gateway of the local control plane and the processes serving it; see the module."""

    #: the name `--gateway` takes (`traefik`, `contour`)
    kind: ClassVar[str] = ""
    #: a human name of the implementation, for messages
    title: ClassVar[str] = ""
    gateway_class: ClassVar[str] = ""
    controller_name: ClassVar[str] = ""
    #: True when the publisher must write hostname EndpointSlices (the gateway refuses
    #: OME's default ExternalName backends); False when OME's default mode is served
    needs_hostname_endpoint_slices: ClassVar[bool] = False
    #: the process whose namespace resolves the homes' names (see `pid`)
    data_plane: ClassVar[str] = ""

    def __init__(
        self,
        plane: LocalControlPlane,
        hosts: Mapping[str, str],
        *,
        dir: Path | None = None,
        namespace: str = "ome-gateway",
        name: str = "global",
        port: int | None = None,
        startup_timeout: float = 60.0,
        detached: bool = False,
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.name = name
        self._dir_given = dir is not None
        self._dir = Path(dir) if dir is not None else None
        self._hosts = dict(hosts)
        self._port = port
        self._startup_timeout = startup_timeout
        self._detached = detached
        self._sandbox: NameSandbox | None = None
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._processes: dict[str, processes.ProcessId] = {}

    # -- what a subclass provides -----------------------------------------------------------

    def _prepare(self) -> None:
        """Find or build the binaries (before anything is started)."""

    def _install_crds(self) -> None:
        """Install the CRDs the implementation needs on the control plane."""

    def _choose_port(self) -> int:
        return processes.free_ports(1)[0]

    def _launch(self) -> None:
        """Start the processes (`_spawn`), in the sandbox."""
        raise NotImplementedError

    @property
    def listener_port(self) -> int:
        """The Gateway listener's port (the same as `port` unless the implementation maps it)."""
        return self.port

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        self._prepare()
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix=f"ome-routing-{self.kind}-"))
        self._dir.mkdir(parents=True, exist_ok=True)
        self._port = self._port or self._choose_port()
        try:
            self._install_crds()
            self.plane.kubectl("apply", "-f", "-", input=self.manifests())
            self._sandbox = NameSandbox(
                self._dir / "names", self._hosts, record=not self._detached
            ).start()
            self._launch()
            self._wait_programmed()
            if self._detached:
                self._save_state()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in reversed(list(self._processes)):
            processes.terminate(self._processes[name], grace=10.0, child=self._children.get(name))
        self._processes.clear()
        self._children.clear()
        if self._sandbox is not None:
            self._sandbox.stop()
        if self._dir is not None:
            (self._dir / STATE_FILE).unlink(missing_ok=True)
            if not self._dir_given:
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

    @staticmethod
    def attached(directory: Path) -> dict[str, Any] | None:
        """The state a detached gateway wrote in `directory`, or None when there is none."""
        try:
            state: dict[str, Any] = json.loads((directory / STATE_FILE).read_text())
        except FileNotFoundError:
            return None
        return state

    @staticmethod
    def stop_attached(directory: Path) -> bool:
        """Stop the processes of a detached gateway started in `directory`; False if none."""
        state = SandboxedGateway.attached(directory)
        if state is None:
            return False
        for entry in reversed(state.get("processes", [])):
            processes.terminate(processes.ProcessId(**entry), grace=10.0)
        (directory / STATE_FILE).unlink(missing_ok=True)
        return True

    # -- what callers use -----------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port on 127.0.0.1 where the data plane serves the Gateway's listener."""
        return processes.started(self._port, GatewayError, "the gateway has no port before start()")

    @property
    def dir(self) -> Path:
        return processes.started(
            self._dir, GatewayError, "the gateway has no directory before start()"
        )

    @property
    def gateway_ref(self) -> str:
        """`namespace/name` of the Gateway, as `endpoint.globalGateway` spells it."""
        return f"{self.namespace}/{self.name}"

    @property
    def sandbox(self) -> NameSandbox:
        return processes.started(
            self._sandbox, GatewayError, "the gateway has no name sandbox before start()"
        )

    @property
    def pid(self) -> int:
        """The data plane's pid: the process that resolves the homes' names and dials them."""
        return self.pids[self.data_plane]

    @property
    def pids(self) -> dict[str, int]:
        if not self._processes:
            raise GatewayError("the gateway is not running")
        return {name: p.pid for name, p in self._processes.items()}

    def log_paths(self) -> list[Path]:
        return [self.dir / f"{name}.log" for name in self._names()]

    def log(self) -> str:
        """Every process's log, one after another, each under its name."""
        parts = []
        for path in self.log_paths():
            try:
                parts.append(f"== {path.name}\n{path.read_text(errors='replace')}")
            except FileNotFoundError:
                continue
        return "\n".join(parts)

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(f"== {path}:\n{processes.tail(path, lines)}" for path in self.log_paths())

    def manifests(self) -> str:
        """The namespace, the GatewayClass and the Gateway, as JSON documents for kubectl."""
        documents = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}},
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": {"name": self.gateway_class},
                "spec": {"controllerName": self.controller_name},
            },
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "gatewayClassName": self.gateway_class,
                    "listeners": [
                        {
                            "name": "http",
                            "protocol": "HTTP",
                            "port": self.listener_port,
                            "allowedRoutes": {"namespaces": {"from": "All"}},
                        }
                    ],
                },
            },
        ]
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": documents})

    def add_hosts(self, hosts: Mapping[str, str]) -> None:
        """Map more workload-cluster names to loopback addresses (see `NameSandbox.add_hosts`).

        Names known before `start()` are better given to the constructor: a resolver that
        caches the hosts file (Go's, for 5 seconds) can ask DNS (the recorder) meanwhile.
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

    # -- for subclasses -------------------------------------------------------------------

    def _spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] = {}) -> None:
        """Start `argv` in the sandbox with a clean environment plus `env`; its log is
        `<name>.log` in the gateway's folder."""
        # A proxy from the environment must never see the workload clusters' hostnames, and
        # in-cluster variables would win over the kubeconfig.
        unset = [*_IN_CLUSTER, *(p for proxy in _PROXIES for p in (proxy, proxy.upper()))]
        command = [
            "env",
            *(a for variable in unset for a in ("-u", variable)),
            *(f"{key}={value}" for key, value in env.items()),
            *argv,
        ]
        child = processes.spawn(
            name,
            self.sandbox.wrap(command),
            self.dir / f"{name}.log",
            outlive_parent=self._detached,
        )
        self._children[name] = child
        self._processes[name] = processes.identify(name, child)

    def _names(self) -> list[str]:
        return list(self._processes) or [self.data_plane]

    def _exited(self) -> str | None:
        for name, child in self._children.items():
            if child.poll() is not None:
                return f"{name} exited with status {child.returncode}"
        return None

    def _ready(self) -> bool:
        conditions = self.gateway_status().get("conditions") or []
        programmed = any(
            isinstance(c, dict) and c.get("type") == "Programmed" and c.get("status") == "True"
            for c in conditions
        )
        return programmed and processes.port_is_listening(self.port)

    def _wait_programmed(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if (exited := self._exited()) is not None:
                raise GatewayError(f"{exited} while starting;\n{self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.2)
        raise GatewayError(
            f"Gateway {self.gateway_ref} was not programmed by {self.title} after "
            f"{self._startup_timeout:.0f}s;\n{self.log_tail()}"
        )

    def _save_state(self) -> None:
        state = {
            "kind": self.kind,
            "gateway": self.gateway_ref,
            "port": self.port,
            "hosts_file": str(self.sandbox.hosts_file),
            "processes": [vars(p) for p in self._processes.values()],
        }
        (self.dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
