"""What the local node could leave behind on the host, to compare before and after."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ome_routing_dev.devcluster.node_sandbox import HOST_SYSCTLS, cgroup_mounts

_PROGRAMS = (
    "kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager", "kube-apiserver",
    "etcd", "containerd", "containerd-shim-runc-v2", "runc", "pause",
)  # fmt: skip
#: Paths a node on a host writes by default; the sandbox keeps them all in its directory.
_PATHS = (
    "/run/containerd", "/run/netns", "/var/run/netns", "/var/lib/cni", "/var/lib/kubelet",
    "/var/lib/containerd", "/var/log/pods", "/var/log/containers", "/etc/cni/net.d",
    "/opt/containerd", "/opt/cni", "/run/xtables.lock", "/usr/libexec/kubernetes",
)  # fmt: skip


@dataclass(frozen=True)
class HostState:
    sysctls: dict[str, str]
    cgroups: frozenset[str]
    mounts: frozenset[str]
    links: frozenset[str]
    paths: frozenset[str]
    processes: frozenset[str]

    @classmethod
    def now(cls, under: Path | None = None) -> HostState:
        """The host as it is; with `under`, only the processes whose command line names it."""
        return cls(
            sysctls={name: Path(f"/proc/sys/{name}").read_text().strip() for name in HOST_SYSCTLS},
            cgroups=frozenset(
                f"{mount}/{entry.name}"
                for mount in cgroup_mounts()
                for entry in os.scandir(mount)
                if entry.is_dir() and entry.name.startswith("ome-routing-node")
            ),
            mounts=frozenset(
                " ".join(line.split()[3:5])
                for line in Path("/proc/self/mountinfo").read_text().splitlines()
            ),
            links=frozenset(os.listdir("/sys/class/net")),
            paths=frozenset(p for p in _PATHS if os.path.lexists(p)),
            processes=frozenset(_processes(under)),
        )


def _processes(under: Path | None) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        program = os.path.basename(argv[0].decode(errors="replace"))
        line = b" ".join(argv).decode(errors="replace")
        if program in _PROGRAMS and (under is None or str(under) in line):
            found.append(f"{pid} {line[:200]}")
    return found
