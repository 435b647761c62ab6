"""A one-node Kubernetes on this machine: the local control plane and a real node, in a sandbox.

    with LocalNode(images=[archive]) as node:        # root only
        node.plane.kubectl("apply", ...)             # Deployments become pods
        node.kubeconfig, node.plane, node.pids

Everything runs inside one `NodeSandbox` (a PID, network and mount namespace of its own):
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd (runc, the CNI
bridge network 10.88.0.0/16), the kubelet (node `local-node`, address 10.88.0.1) and
kube-proxy (iptables mode). From the host the API server is reached as always, at
https://127.0.0.1:PORT (`plane.server_url`): a relay (`devcluster.relay`) listens there and
carries each connection into the namespace. Inside, kube-apiserver listens on every address
of the namespace and advertises 10.88.0.1, so the `kubernetes` Service's ClusterIP
(10.0.0.1:443) leads pods to it through kube-proxy's rules: in-cluster configuration works
as in any cluster, with service-account tokens that the kubelet requests for each pod
(the ServiceAccount admission plugin, the token controller, `kube-root-ca.crt`). The API
server reaches the kubelet at 10.88.0.1:10250 for `kubectl logs`, `exec` and
`port-forward` (the kubelet checks its client certificate and asks the API server).

kube-proxy rather than a route of our own because it is what a cluster runs: Services of
every kind (the `kubernetes` Service, the reporter's, a model server's) work as they would
on a platform team's nodes, ClusterIP rules, masquerade and all.

The images are imported with `ctr images import` (the pause image, built from source, and
the archives given, such as `make image`'s), so pods use `imagePullPolicy: Never` or
`IfNotPresent`; the namespace has no route out, so nothing is ever pulled.

`stop()` ends every process, the sandbox's namespaces and the node's cgroups, and puts
back any global sysctl that changed, also when `start()` failed half way. Started with
`detached=True` (`ome-routing dev up --node`), `LocalNode.attach(dir).stop()` does it later.

Errors: `NodeError`, and those of the control plane (`ControlPlaneError`, `PkiError`,
`ToolsError`) and the sandbox (`SandboxError`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from ome_routing_dev.devcluster import processes
from ome_routing_dev.devcluster.controlplane import ControlPlaneError, LocalControlPlane
from ome_routing_dev.devcluster.node_config import (
    NODE_NAME,
    NodeLayout,
    cni_network,
    containerd_config,
    kube_proxy_config,
    kubeconfig,
    kubelet_config,
)
from ome_routing_dev.devcluster.node_plane import USERS, NodeControlPlane
from ome_routing_dev.devcluster.node_sandbox import NODE_IP, NodeSandbox, SandboxError
from ome_routing_dev.devcluster.node_tools import NodeTools, ensure_node_tools
from ome_routing_dev.devcluster.pki import Pki
from ome_routing_dev.devcluster.tools import Tools, ensure_tools

STATE_FILE = "node.json"
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_NOT_STARTED = "the local node is not started"


class NodeError(RuntimeError):
    """The node did not start or become Ready."""


class LocalNode:
    """See the module docstring."""

    def __init__(
        self,
        dir: Path | None = None,
        tools: Tools | None = None,
        node_tools: NodeTools | None = None,
        *,
        images: Sequence[Path] = (),
        detached: bool = False,
        crd_dir: Path | None = None,
        install_crds: bool = True,
        ready_timeout: float = 120.0,
    ) -> None:
        self._dir_given = dir is not None
        self._dir = Path(dir).resolve() if dir is not None else None
        self._tools = tools
        self._node_tools = node_tools
        self._images = list(images)
        self._detached = detached
        self._crd_dir = crd_dir
        self._install_crds = install_crds
        self._ready_timeout = ready_timeout
        self._sandbox: NodeSandbox | None = None
        self._plane: LocalControlPlane | None = None
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._processes: list[processes.ProcessId] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        if os.geteuid() != 0:
            raise NodeError(
                "the local node needs root (namespaces, mounts, cgroups, a container runtime); "
                "run it as root"
            )
        tools = self._tools = self._tools or ensure_tools()
        node_tools = self._node_tools = self._node_tools or ensure_node_tools()
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="ome-routing-node-"))
        _check_dir(self._dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        if (self._dir / STATE_FILE).exists():
            LocalNode.attach(self._dir).stop()
        self._sandbox = NodeSandbox(self._dir / "node", detached=self._detached)
        self._save()
        try:
            self._sandbox.start()
            self._plane = NodeControlPlane(
                self._sandbox,
                self._dir,
                tools,
                detached=self._detached,
                crd_dir=self._crd_dir,
                install_crds=self._install_crds,
            ).start()
            self._start_node(node_tools)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the control plane and the node; leave nothing behind on the host."""
        errors: list[str] = []
        if self._plane is not None:
            try:
                self._plane.stop()
            except ControlPlaneError as error:
                errors.append(str(error))
        if self._sandbox is not None:
            try:
                self._sandbox.stop()
            except SandboxError as error:
                errors.append(str(error))
        self._processes, self._children = [], {}
        if self._dir is not None:
            (self._dir / STATE_FILE).unlink(missing_ok=True)
            if not self._dir_given:
                shutil.rmtree(self._dir, ignore_errors=True)
        if errors:
            raise NodeError("; ".join(errors))

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
    def attach(cls, dir: Path) -> LocalNode:
        """The node recorded in `dir` by an earlier (detached) start, to stop it."""
        dir = Path(dir).resolve()
        if not (dir / STATE_FILE).exists():
            raise NodeError(f"no local node is recorded in {dir}")
        node = cls(dir, detached=True)
        state = json.loads((dir / STATE_FILE).read_text())
        node._processes = [processes.ProcessId(**entry) for entry in state["processes"]]
        try:
            node._sandbox = NodeSandbox.attach(dir / "node")
        except SandboxError:
            node._sandbox = None
        try:
            node._plane = LocalControlPlane.attach(dir)
        except ControlPlaneError:
            node._plane = None
        return node

    # -- what callers use -------------------------------------------------------------------

    @property
    def plane(self) -> LocalControlPlane:
        return processes.started(self._plane, NodeError, _NOT_STARTED)

    @property
    def sandbox(self) -> NodeSandbox:
        return processes.started(self._sandbox, NodeError, _NOT_STARTED)

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def layout(self) -> NodeLayout:
        return NodeLayout(self.sandbox.dir)

    @property
    def pids(self) -> dict[str, int]:
        return {**self.plane.pids, **{p.name: p.pid for p in self._processes}}

    def import_image(self, archive: Path) -> None:
        """Load a docker-archive or OCI archive into the node's containerd (`ctr import`)."""
        assert self._node_tools is not None
        self.sandbox.run(
            [str(self._node_tools.ctr), f"--address={self.layout.containerd_socket}",
             "--namespace=k8s.io", "images", "import", str(archive)],
            f"ctr images import {archive}",
        )  # fmt: skip

    # -- internals --------------------------------------------------------------------------

    def _start_node(self, node_tools: NodeTools) -> None:
        plane, layout = self.plane, self.layout
        certs = Pki.in_directory(plane.dir / "certs")
        inside = f"https://127.0.0.1:{plane.ports['kube-apiserver']}"
        for component in ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
            user = USERS[component].rsplit("CN=", 1)[1]
            cert_dir = certs.ca_cert.parent
            layout.kubeconfig(component).write_text(
                kubeconfig(inside, certs.ca_cert, cert_dir / f"{component}.crt",
                           cert_dir / f"{component}.key", user)
            )  # fmt: skip
            layout.kubeconfig(component).chmod(0o600)
        layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        (layout.cni_conf_dir / "10-ome-routing-node.conflist").write_text(cni_network(layout))
        layout.containerd_config.write_text(
            containerd_config(layout, node_tools.runc, node_tools.cni_dir, node_tools.pause_image)
        )
        layout.kubelet_config.write_text(
            kubelet_config(layout, certs.ca_cert, self.sandbox.cgroup_root)
        )
        layout.kube_proxy_config.write_text(kube_proxy_config(layout))
        layout.resolv_conf.write_text("# the local node's pods reach no name server\n")
        self._spawn(
            "containerd", [str(node_tools.containerd), f"--config={layout.containerd_config}"]
        )
        self._wait_containerd(node_tools)
        for archive in [node_tools.pause_archive, *self._images]:
            self.import_image(archive)
        kcm = layout.kubeconfig("kube-controller-manager")
        scheduler = layout.kubeconfig("kube-scheduler")
        self._spawn("kube-controller-manager", [
            str(node_tools.kube_controller_manager), f"--kubeconfig={kcm}",
            f"--authentication-kubeconfig={kcm}", f"--authorization-kubeconfig={kcm}",
            "--bind-address=127.0.0.1", "--leader-elect=false",
            f"--root-ca-file={certs.ca_cert}",
            f"--service-account-private-key-file={certs.service_account_key}",
            "--use-service-account-credentials=true",
            "--service-cluster-ip-range=10.0.0.0/24", "--allocate-node-cidrs=false",
            "--controllers=*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
        ])  # fmt: skip
        self._spawn("kube-scheduler", [
            str(node_tools.kube_scheduler), f"--kubeconfig={scheduler}",
            f"--authentication-kubeconfig={scheduler}", f"--authorization-kubeconfig={scheduler}",
            "--bind-address=127.0.0.1", "--leader-elect=false",
        ])  # fmt: skip
        self._spawn("kubelet", [
            str(node_tools.kubelet), f"--config={layout.kubelet_config}",
            f"--kubeconfig={layout.kubeconfig('kubelet')}", f"--root-dir={layout.kubelet_root}",
            f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}",
        ])  # fmt: skip
        self._spawn("kube-proxy", [
            str(node_tools.kube_proxy), f"--config={layout.kube_proxy_config}",
        ])  # fmt: skip
        self._wait_node_ready()

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        assert self._node_tools is not None
        path = f"{self._node_tools.containerd_dir}:{_SYSTEM_PATH}"
        (self.layout.dir / f"{name}.log").unlink(missing_ok=True)  # one start's log
        child = processes.spawn(
            name,
            self.sandbox.enter(["env", f"PATH={path}", *argv]),
            self.layout.dir / f"{name}.log",
            outlive_parent=self._detached,
        )
        self._children[name] = child
        self._processes.append(processes.identify(name, child))
        self._save()

    def _check_alive(self) -> None:
        for name, child in self._children.items():
            if child.poll() is not None:
                raise NodeError(
                    f"{name} exited with status {child.returncode}; the end of "
                    f"{self.layout.dir / (name + '.log')}:\n"
                    f"{processes.tail(self.layout.dir / (name + '.log'))}"
                )

    def _wait_containerd(self, node_tools: NodeTools) -> None:
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                self.sandbox.run(
                    [str(node_tools.ctr), f"--address={self.layout.containerd_socket}",
                     "version"], "ctr version",
                )  # fmt: skip
                return
            except SandboxError:
                pass
            time.sleep(0.1)
        raise NodeError(
            f"containerd did not answer within 30s; the end of its log:\n"
            f"{processes.tail(self.layout.dir / 'containerd.log')}"
        )

    def _wait_node_ready(self) -> None:
        deadline = time.monotonic() + self._ready_timeout
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            result = self.plane.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
            if result.returncode == 0:
                conditions = json.loads(result.stdout).get("status", {}).get("conditions", [])
                ready = [c for c in conditions if c.get("type") == "Ready"]
                last = ready[0].get("message", "") if ready else "no Ready condition yet"
                if ready and ready[0].get("status") == "True":
                    # A pod is admitted once its namespace has the `default` ServiceAccount
                    # (the controller manager makes it) and kube-root-ca.crt.
                    found = self.plane.kubectl(
                        "get", "-n", "default", "serviceaccount/default",
                        "configmap/kube-root-ca.crt", "-o", "name", check=False,
                    )  # fmt: skip
                    if found.returncode == 0:
                        return
                    last = f"node Ready, waiting for the default ServiceAccount: {found.stderr}"
            else:
                last = result.stderr.strip()
            time.sleep(0.2)
        raise NodeError(
            f"node {NODE_NAME} was not Ready after {self._ready_timeout:.0f}s ({last}); "
            f"the end of {self.layout.dir / 'kubelet.log'}:\n"
            f"{processes.tail(self.layout.dir / 'kubelet.log')}"
        )

    def _save(self) -> None:
        assert self._dir is not None
        state = {"processes": [vars(p) for p in self._processes]}
        (self._dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def _check_dir(directory: Path) -> None:
    """The node's sandbox overlays /var and /run: its directory must be outside them."""
    resolved = directory.resolve()
    for overlaid in (Path("/var"), Path("/run")):
        if resolved == overlaid or overlaid in resolved.parents:
            raise NodeError(
                f"the local node's directory {resolved} is under {overlaid}, which the node's "
                "sandbox overlays; choose another one"
            )
