"""The local node's control plane: etcd and kube-apiserver inside the node's sandbox.

kube-apiserver listens on every address of the sandbox's network namespace (its loopback
and the node's 10.88.0.1, which it advertises, so that the `kubernetes` Service leads pods
to it), with the Node authorizer, NodeRestriction and the ServiceAccount admission plugin,
and a client certificate for the kubelets. From the host it is reached at `server_url`
(https://127.0.0.1:PORT) as any local control plane: a relay (`devcluster.relay`) is
started inside with a listening socket bound on the host's loopback, and carries each
connection to the API server. `USERS` are the components' certificate subjects.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from typing import Any

from ome_routing_dev.devcluster import processes
from ome_routing_dev.devcluster.controlplane import LocalControlPlane, _PortTaken
from ome_routing_dev.devcluster.node_config import NODE_NAME
from ome_routing_dev.devcluster.node_sandbox import NODE_IP, NodeSandbox
from ome_routing_dev.devcluster.pki import Pki, sign_client
from ome_routing_dev.devcluster.tools import Tools

#: Users of the components' client certificates, as kubeadm names them; the API server's
#: bootstrap RBAC binds each to its role (the kubelet's is the Node authorizer's).
USERS = {
    "kubelet": f"/O=system:nodes/CN=system:node:{NODE_NAME}",
    "kube-controller-manager": "/CN=system:kube-controller-manager",
    "kube-scheduler": "/CN=system:kube-scheduler",
    "kube-proxy": "/CN=system:kube-proxy",
    "apiserver-kubelet-client": "/O=system:masters/CN=kube-apiserver-kubelet-client",
}


class NodeControlPlane(LocalControlPlane):
    """etcd and kube-apiserver inside the sandbox, reached from the host through a relay."""

    def __init__(self, sandbox: NodeSandbox, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sandbox = sandbox

    def _launch(self, tools: Tools, pki: Pki) -> None:
        certs = self.dir / "certs"
        for name, subject in USERS.items():  # signed by this start's CA
            sign_client(pki, name, subject)
        self._apiserver_flags = [
            "--bind-address=0.0.0.0",  # inside the sandbox: its loopback and 10.88.0.1
            f"--advertise-address={NODE_IP}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--disable-admission-plugins=",  # the ServiceAccount plugin runs, as in a cluster
            f"--kubelet-client-certificate={certs / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={certs / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            *self._apiserver_flags,
        ]
        super()._launch(tools, pki)

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        super()._spawn(name, self._sandbox.enter(argv))

    def _expose(self) -> None:
        port = self.ports["kube-apiserver"]
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", port))
        except OSError:
            listener.close()
            raise _PortTaken("the relay to kube-apiserver") from None
        with listener:
            listener.listen(128)
            fd = listener.fileno()
            relay = [sys.executable, "-m", "ome_routing_dev.devcluster.relay", str(fd)]
            argv = [*relay, "127.0.0.1", str(port)]
            child = processes.spawn(
                "relay",
                self._sandbox.enter(argv),
                self.dir / "relay.log",
                outlive_parent=self._detached,
                pass_fds=(fd,),
            )
        self._children["relay"] = child
        self._processes.append(processes.identify("relay", child))
