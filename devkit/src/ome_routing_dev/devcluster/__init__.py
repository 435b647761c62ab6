"""The local control plane: etcd and kube-apiserver on loopback, for tests and the demo.

    tools = ensure_tools(progress=print)          # built once, then a cache hit
    with LocalControlPlane(tools=tools) as plane:  # a temporary directory, free ports
        plane.kubeconfig, plane.server_url, plane.version, plane.bin_dir

It uses no project package but the core.
"""

from ome_routing_dev.devcluster.controlplane import ControlPlaneError, LocalControlPlane
from ome_routing_dev.devcluster.pki import PkiError
from ome_routing_dev.devcluster.tools import Tools, ToolsError, cache_dir, ensure_tools

__all__ = [
    "ControlPlaneError",
    "LocalControlPlane",
    "PkiError",
    "Tools",
    "ToolsError",
    "cache_dir",
    "ensure_tools",
]
