"""A real kube-apiserver and etcd on free loopback ports, as controller-runtime's envtest runs them.

`LocalControlPlane(dir).start()` makes certificates, starts etcd and kube-apiserver on
127.0.0.1, waits for `/readyz`, writes an admin kubeconfig (`system:masters`) and installs
the CRDs of `config/crd/` (waiting until they are Established), and with `gateway_api=True`
the Gateway API's standard-channel CRDs. `stop()` ends both processes
and waits until they are gone; it also runs at interpreter exit and on SIGTERM. Started with
`detached=True`, the processes outlive this one (`ome-routing dev up`) and
`LocalControlPlane.attach(dir).stop()` ends them later.

It never binds or connects to anything but 127.0.0.1.

Why one module of ~450 lines: it is one object, `LocalControlPlane`, whose lifecycle
(start with its retries on a taken port, attach, stop at exit and on SIGTERM), state file
and kubectl helpers share the same processes and state, and whose launch steps
(`_launch`, `_spawn`, `_expose`) are the hooks `node_plane.NodeControlPlane` overrides.
Its parts elsewhere already have modules of their own: processes, certificates, the
kubeconfig, the API client, the tools.

Errors: `ControlPlaneError` (did not start, or a kubectl call failed; the message carries the
process log or kubectl's output verbatim). `PkiError` and `ToolsError` come from making the
certificates and the binaries.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

from ome_routing_dev.devcluster import processes
from ome_routing_dev.devcluster.api import Api, ApiCallError
from ome_routing_dev.devcluster.gateway_tools import install_gateway_api_crds
from ome_routing_dev.devcluster.kubeconfig import client_ssl_context, write_admin_kubeconfig
from ome_routing_dev.devcluster.pki import Pki, make_pki
from ome_routing_dev.devcluster.tools import Tools, ensure_tools, tools_module_dir

STATE_FILE = "control-plane.json"
_START_ATTEMPTS = 3  # a free port can be taken by someone else before our process binds it


class ControlPlaneError(RuntimeError):
    """The control plane did not start, or a command against it failed."""


def default_crd_dir() -> Path | None:
    """The repository's `config/crd/`, when there is one."""
    try:
        candidate = tools_module_dir().parent / "config" / "crd"
    except RuntimeError:
        return None
    return candidate if candidate.is_dir() else None


class LocalControlPlane:
    """etcd + kube-apiserver on loopback; see the module docstring."""

    def __init__(
        self,
        dir: Path | None = None,
        tools: Tools | None = None,
        *,
        crd_dir: Path | None = None,
        install_crds: bool = True,
        detached: bool = False,
        startup_timeout: float = 90.0,
        apiserver_flags: Sequence[str] = (),
        gateway_api: bool = False,
    ) -> None:
        self._dir_given = dir is not None
        self._dir = Path(dir).resolve() if dir is not None else None
        self._tools = tools
        self._crd_dir = crd_dir if crd_dir is not None else default_crd_dir()
        self._install_crds = install_crds
        self._detached = detached
        self._startup_timeout = startup_timeout
        #: extra kube-apiserver flags, after ours; one of the same name as ours replaces it
        self._apiserver_flags = list(apiserver_flags)
        #: also install the Gateway API standard-channel CRDs (see `gateway_tools`)
        self._gateway_api = gateway_api
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._processes: list[processes.ProcessId] = []
        self._state: dict[str, Any] = {}
        self._api_client: Api | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start etcd and kube-apiserver and return once the API server is ready."""
        if self._processes:
            raise ControlPlaneError(f"the control plane in {self.dir} is already started")
        tools = self._tools = self._tools or ensure_tools()
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="ome-routing-control-plane-"))
        self._dir.mkdir(parents=True, exist_ok=True)
        if (self._dir / STATE_FILE).exists():
            previous = LocalControlPlane.attach(self._dir)
            if previous.is_running():
                pids = ", ".join(f"{name} {pid}" for name, pid in sorted(previous.pids.items()))
                raise ControlPlaneError(
                    f"a control plane already runs from {self._dir} (pids: {pids}); "
                    f"stop it first with `ome-routing dev down --dir {self._dir}`"
                )
            previous.stop()
        pki = make_pki(self._dir / "certs")
        _live.add(self)
        try:
            for attempt in range(1, _START_ATTEMPTS + 1):
                try:
                    self._launch(tools, pki)
                    break
                except _PortTaken:
                    self._stop_processes()
                    if attempt == _START_ATTEMPTS:
                        raise
            write_admin_kubeconfig(self.kubeconfig, self.server_url, pki)
            self._state["version"] = self._api().get_json("/version")["gitVersion"]
            self._save_state()
            if self._install_crds and self._crd_dir is not None:
                manifests = sorted(
                    p for p in self._crd_dir.iterdir() if p.suffix in (".yaml", ".yml", ".json")
                )
                if manifests:
                    self.install_crds(manifests)
            if self._gateway_api:
                install_gateway_api_crds(self.kubectl, self.wait_established)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End both processes, wait until they are gone, and remove a directory we made."""
        _live.discard(self)
        self._stop_processes()
        if self._dir is not None:
            (self._dir / STATE_FILE).unlink(missing_ok=True)
            # Throwaway data (each start begins empty); the logs and certificates stay.
            shutil.rmtree(self._dir / "etcd", ignore_errors=True)
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

    @classmethod
    def attach(cls, dir: Path, tools: Tools | None = None) -> LocalControlPlane:
        """The control plane recorded in `dir` by an earlier (detached) start."""
        path = Path(dir).resolve() / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise ControlPlaneError(f"no control plane is recorded in {path.parent}") from None
        plane = cls(Path(dir), tools, install_crds=False, detached=True)
        plane._state = state
        plane._processes = [processes.ProcessId(**entry) for entry in state["processes"]]
        return plane

    def is_running(self) -> bool:
        """True when every process of the control plane is alive."""
        return bool(self._processes) and all(p.is_alive() for p in self._processes)

    # -- what callers use -----------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return processes.started(
            self._dir, ControlPlaneError, "the control plane has no directory before start()"
        )

    @property
    def kubeconfig(self) -> Path:
        """An admin kubeconfig (group `system:masters`, certificates embedded)."""
        return self.dir / "kubeconfig"

    @property
    def server_url(self) -> str:
        return str(self._require("server_url"))

    @property
    def version(self) -> str:
        """The API server's `gitVersion`, e.g. `v1.34.12`."""
        return str(self._require("version"))

    @property
    def ports(self) -> dict[str, int]:
        """The loopback ports in use: `kube-apiserver`, `etcd-client`, `etcd-peer`."""
        return {k: int(v) for k, v in self._require("ports").items()}

    @property
    def pids(self) -> dict[str, int]:
        return {p.name: p.pid for p in self._processes}

    @property
    def bin_dir(self) -> Path:
        """The folder with kubectl and helm, to put first on PATH."""
        return self._require_tools().bin_dir

    @property
    def tools(self) -> Tools:
        return self._require_tools()

    def env(self) -> dict[str, str]:
        """os.environ with KUBECONFIG set and kubectl/helm first on PATH."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.dir / "kube-cache"),
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl against this control plane."""
        command = [str(self._require_tools().kubectl), *args]
        result = subprocess.run(
            command,
            input=input,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}"
            )
        return result

    def install_crds(self, manifests: Sequence[Path], timeout: float = 60.0) -> None:
        """Apply CRD manifests and wait until every one of them is Established."""
        files = [arg for path in manifests for arg in ("-f", str(path))]
        self.kubectl("apply", *files)
        self.wait_established(files, timeout)

    def wait_established(self, files: Sequence[str], timeout: float = 60.0) -> None:
        """Wait until the CRDs of `files` (`-f PATH` pairs) are Established.

        A CRD created a moment ago may have no `status.conditions` yet, and `kubectl wait`
        then fails at once instead of waiting: that one failure is retried until `timeout`.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = max(1.0, deadline - time.monotonic())
            result = self.kubectl(
                "wait", "--for=condition=Established", f"--timeout={left:.0f}s", *files,
                check=False,
            )  # fmt: skip
            if result.returncode == 0:
                return
            not_yet = ".status.conditions accessor error" in result.stderr
            if not not_yet or time.monotonic() >= deadline:
                raise ControlPlaneError(
                    f"kubectl wait --for=condition=Established {' '.join(files)} failed "
                    f"({result.returncode}): {(result.stderr or result.stdout).strip()}"
                )
            time.sleep(0.2)

    def delete_namespace(self, name: str) -> None:
        """Delete a namespace and everything in it, now.

        Without kube-controller-manager nobody empties a deleted namespace, so this does its
        work: delete every namespaced object, then finalize the namespace. Objects held by a
        finalizer stay until it is removed.
        """
        try:
            self._api().delete_namespace(name)
        except (ApiCallError, OSError) as error:
            raise ControlPlaneError(f"deleting namespace {name}: {error}") from error

    # -- internals --------------------------------------------------------------------------

    def _launch(self, tools: Tools, pki: Pki) -> None:
        api_port, etcd_port, peer_port = processes.free_ports(3)
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        server_url = f"https://127.0.0.1:{api_port}"
        data = self.dir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        etcd_argv = [
            str(tools.etcd),
            "--name=default",
            f"--data-dir={data}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--unsafe-no-fsync=true",  # throwaway data: speed over durability
            "--log-level=warn",
        ]
        apiserver_argv = [
            str(tools.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={self.dir / 'certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={server_url}",
            f"--service-account-key-file={pki.service_account_public_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # As envtest: no default ServiceAccount controller runs, so do not require one.
            "--disable-admission-plugins=ServiceAccount",
            # as OpenShift: setting blockOwnerDeletion needs update on the owner's finalizers
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
            "--profiling=false",
        ]
        apiserver_argv = _with_flags(apiserver_argv, self._apiserver_flags)
        self._state = {
            "server_url": server_url,
            "ports": {"kube-apiserver": api_port, "etcd-client": etcd_port, "etcd-peer": peer_port},
            "argv": {"etcd": etcd_argv, "kube-apiserver": apiserver_argv},
        }
        self._api_client = None
        for name, argv in (("etcd", etcd_argv), ("kube-apiserver", apiserver_argv)):
            self._spawn(name, argv)
        self._expose()
        self._save_state()
        self._wait_ready()

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        """Start one of the control plane's processes, logging to `<dir>/<name>.log`."""
        child = processes.spawn(name, argv, self.dir / f"{name}.log", outlive_parent=self._detached)
        self._children[name] = child
        self._processes.append(processes.identify(name, child))

    def _expose(self) -> None:
        """Make the API server reachable at `server_url` (it already is: it binds loopback)."""

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout
        last_error = ""
        while time.monotonic() < deadline:
            for name, child in self._children.items():
                if child.poll() is not None:
                    log = processes.tail(self.dir / f"{name}.log")
                    if "address already in use" in log:
                        raise _PortTaken(name)
                    raise ControlPlaneError(
                        f"{name} exited with status {child.returncode} while starting; "
                        f"the end of {self.dir / (name + '.log')}:\n{log}"
                    )
            try:
                _, body = self._api().request("GET", "/readyz", ok=(200, 500))
                if body.strip() == "ok":
                    return
                last_error = body
            except (OSError, ApiCallError) as error:
                last_error = str(error)
            time.sleep(0.1)
        raise ControlPlaneError(
            f"kube-apiserver was not ready after {self._startup_timeout:.0f}s ({last_error}); "
            f"the end of {self.dir / 'kube-apiserver.log'}:\n"
            f"{processes.tail(self.dir / 'kube-apiserver.log')}"
        )

    def _api(self) -> Api:
        if self._api_client is None:
            pki = Pki.in_directory(self.dir / "certs")
            self._api_client = Api(self.server_url, client_ssl_context(pki))
        return self._api_client

    def _save_state(self) -> None:
        self._state["processes"] = [vars(p) for p in self._processes]
        self._state["dir"] = str(self.dir)
        (self.dir / STATE_FILE).write_text(json.dumps(self._state, indent=2) + "\n")

    def _stop_processes(self) -> None:
        # The API server first, so that it does not spend its shutdown retrying etcd.
        errors: list[str] = []
        for process in sorted(self._processes, key=lambda p: p.name != "kube-apiserver"):
            try:
                processes.terminate(process, grace=15.0, child=self._children.get(process.name))
            except RuntimeError as error:
                errors.append(str(error))
        self._processes = []
        self._children = {}
        if errors:
            raise ControlPlaneError("; ".join(errors))

    def _require(self, key: str) -> Any:
        if key not in self._state:
            raise ControlPlaneError(f"the control plane has no {key} before start()")
        return self._state[key]

    def _require_tools(self) -> Tools:
        if self._tools is None:
            self._tools = ensure_tools()
        return self._tools


def _with_flags(argv: list[str], extra: Sequence[str]) -> list[str]:
    """`argv` with `extra` after it, where a flag of `extra` replaces one of the same name
    (kube-apiserver would append a repeated list flag's values, not replace them)."""
    names = {flag.split("=", 1)[0] for flag in extra if flag.startswith("--")}
    kept = [arg for arg in argv if arg.split("=", 1)[0] not in names]
    return [*kept, *extra]


class _PortTaken(ControlPlaneError):
    def __init__(self, name: str) -> None:
        super().__init__(f"{name} found its loopback port taken")


# Control planes started by this process and not yet stopped: stopped at exit and on SIGTERM.
_live: weakref.WeakSet[LocalControlPlane] = weakref.WeakSet()


def _stop_all() -> None:
    for plane in list(_live):
        if not plane._detached:
            plane.stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Unwind like Ctrl-C does, so that fixtures and `with` blocks stop their control planes.
    raise SystemExit(128 + signum)


atexit.register(_stop_all)
if (
    threading.current_thread() is threading.main_thread()
    and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
):
    signal.signal(signal.SIGTERM, _on_sigterm)
