"""The local node's configuration files: containerd's, the CNI network's, the kubelet's,
kube-proxy's, and a kubeconfig for each component. Pure text; `node.py` writes them.

Every path is under the node's directory, or under /run, which the sandbox overlays with a
folder of the node's directory: nothing is written outside it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from ome_routing_dev.devcluster.node_sandbox import BRIDGE, NODE_IP, POD_SUBNET

NODE_NAME = "local-node"
CLUSTER_DOMAIN = "cluster.local"
KUBELET_PORT = 10250


@dataclass(frozen=True)
class NodeLayout:
    """Where the node keeps its state, all under `dir`."""

    dir: Path

    @property
    def containerd_config(self) -> Path:
        return self.dir / "containerd.toml"

    @property
    def containerd_socket(self) -> Path:
        """containerd's socket, at its usual path inside the sandbox, whose /run is the
        node's own (a unix socket's path is short, which the node's directory may not be)."""
        return Path("/run/containerd/containerd.sock")

    @property
    def cni_conf_dir(self) -> Path:
        return self.dir / "cni" / "net.d"

    @property
    def kubelet_config(self) -> Path:
        return self.dir / "kubelet.yaml"

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's usual root inside the sandbox, whose /var is the node's own (the
        kubelet makes unix sockets there, whose paths must be short)."""
        return Path("/var/lib/kubelet")

    @property
    def kube_proxy_config(self) -> Path:
        return self.dir / "kube-proxy.yaml"

    @property
    def resolv_conf(self) -> Path:
        return self.dir / "resolv.conf"

    def kubeconfig(self, component: str) -> Path:
        return self.dir / f"{component}.kubeconfig"


def containerd_config(layout: NodeLayout, runc: Path, cni_dir: Path, pause_image: str) -> str:
    """containerd 2's config (version 3): CRI with runc (cgroupfs), the node's CNI network."""
    root = layout.dir / "containerd"
    cri = "io.containerd.cri.v1.runtime"
    return f"""version = 3
root = "{root / "root"}"
state = "/run/containerd"
# containerd's NRI and the optional-binaries folder (/opt/containerd) are not used
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt"]

[grpc]
  address = "{layout.containerd_socket}"

[plugins."{cri}"]
  # root here lacks CAP_SYS_RESOURCE: a container may not lower its oom_score_adj below ours
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  [plugins."{cri}".containerd]
    default_runtime_name = "runc"
    [plugins."{cri}".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."{cri}".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins."{cri}".cni]
    bin_dirs = ["{cni_dir}"]
    conf_dir = "{layout.cni_conf_dir}"
    max_conf_num = 1

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{pause_image}"

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def cni_network(layout: NodeLayout) -> str:
    """One bridge network: the pods' addresses from POD_SUBNET, the node as their gateway."""
    conflist = {
        "cniVersion": "1.0.0",
        "name": "ome-routing-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.dir / "cni" / "ipam"),
                },
            }
        ],
    }
    return json.dumps(conflist, indent=2) + "\n"


def kubelet_config(layout: NodeLayout, ca_cert: Path, cgroup_root: str) -> str:
    """The KubeletConfiguration for this machine (cgroup v1 through cgroupfs, no swap check,
    no image garbage collection: the node's images are imported, never pulled)."""
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(layout.resolv_conf),
        "podLogsDir": str(layout.dir / "pod-logs"),
        "volumePluginDir": str(layout.dir / "volume-plugins"),
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "protectKernelDefaults": False,
        "maxPods": 50,
    }
    return json.dumps(config, indent=2) + "\n"


def kube_proxy_config(layout: NodeLayout) -> str:
    """kube-proxy in iptables mode in the node's namespace; it leaves the host's conntrack
    limits alone, and masquerades all Service traffic (the pods share one bridge, and
    masquerading brings a Service's replies back through the node)."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(layout.kubeconfig("kube-proxy"))},
        "hostnameOverride": NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "iptables": {"masqueradeAll": True},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "nodePortAddresses": [f"{NODE_IP}/32"],
    }
    return json.dumps(config, indent=2) + "\n"


def kubeconfig(server: str, ca_cert: Path, cert: Path, key: Path, user: str) -> str:
    """A kubeconfig for one component, its certificates embedded."""

    def b64(file: Path) -> str:
        return base64.b64encode(file.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
    return json.dumps(config, indent=2) + "\n"
