"""The local node's namespaces: one process holds a PID, network and mount namespace of its own.

    sandbox = NodeSandbox(dir).start()
    sandbox.enter(["kubelet", ...])    # an argv that runs inside (nsenter)
    sandbox.stop()                     # every process inside is gone, the host as it was

The holder is `unshare --pid --fork --kill-child --mount-proc --net --mount` running a tiny
init (PID 1 of the namespace, reaping orphans). Everything of the node runs inside
(`enter`): when the holder ends, the kernel kills every process of the PID namespace,
containers and shims included, and the network and mount namespaces go with them: the
bridge, the iptables rules, the pods' network namespaces, every mount. Not detached, the
holder dies with this process (PR_SET_PDEATHSIG), and so does the rest.

Inside, before anything starts:
- the network: `lo` up, the bridge `cni0` with the node's address 10.88.0.1/16 (the kubelet
  refuses a loopback node IP; the CNI bridge plugin then uses this bridge as the pods'
  gateway), and IPv4 forwarding (a per-namespace setting). Nothing else: no route leaves
  the namespace, so a pod reaches nothing but the node and other pods.
- the mounts: `/` made rshared (inside only), and `/var` and `/run` overlaid with folders of
  the node's directory, so a file any component writes there (CNI's cache, /run/containerd,
  the pods' log links) lands in the node's directory, not on the host.
- the global sysctls the kubelet sets (`vm.overcommit_memory`, `kernel.panic`, ...), which
  no namespace isolates: each of /proc/sys's files is shadowed by a bind-mounted copy, so the
  kubelet's writes reach the copy. Their host values are also recorded in `sandbox.json`
  before the start and written back by `stop()` if anything changed them.

What the kernel does not clean up is cleaned by `stop()`, after a failure too: the cgroups
the kubelet and runc create (all under the one `cgroup_root`, in every hierarchy).
Errors: `SandboxError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from ome_routing_dev.devcluster import processes

NODE_IP = "10.88.0.1"
POD_SUBNET = "10.88.0.0/16"
BRIDGE = "cni0"
#: The global sysctls the kubelet sets (pkg/kubelet/cm's setupKernelTunables).
HOST_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
STATE_FILE = "sandbox.json"
_OVERLAID = ("/var", "/run")
_INIT = (
    "import os, signal\n"
    "signal.signal(signal.SIGTERM, lambda *_: os._exit(0))\n"
    "signal.signal(signal.SIGCHLD, lambda *_: None)\n"
    "while True:\n"
    "    try:\n"
    "        os.waitpid(-1, 0)\n"
    "    except ChildProcessError:\n"
    "        signal.pause()\n"
)


class SandboxError(RuntimeError):
    """The node's namespaces could not be made, entered or cleaned up."""


class NodeSandbox:
    """See the module docstring."""

    def __init__(self, dir: Path, *, detached: bool = False) -> None:
        self.dir = Path(dir).resolve()
        self._detached = detached
        self._holder: processes.ProcessId | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._init_pid = 0
        self.cgroup_root = f"/ome-routing-node-{uuid.uuid4().hex[:8]}"
        self._sysctls: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        if os.geteuid() != 0:
            raise SandboxError("the local node needs root (namespaces, mounts, cgroups)")
        self.dir.mkdir(parents=True, exist_ok=True)
        if (self.dir / STATE_FILE).exists():
            NodeSandbox.attach(self.dir).stop()
        self._sysctls = {name: _read_sysctl(name) for name in HOST_SYSCTLS}
        self._save()  # the host's values are on disk before anything can change them
        argv = [
            "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--mount",
            "--propagation=private", "--", sys.executable, "-c", _INIT,
        ]  # fmt: skip
        self._child = processes.spawn(
            "node-sandbox", argv, self.dir / "sandbox.log", outlive_parent=self._detached
        )
        self._holder = processes.identify("node-sandbox", self._child)
        try:
            self._init_pid = self._find_init()
            self._save()
            make_cgroups(self.cgroup_root)
            self._set_up()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End every process inside, remove the node's cgroups, put back changed sysctls."""
        errors: list[str] = []
        if self._holder is not None:
            try:
                processes.terminate(self._holder, grace=5.0, child=self._child)
            except RuntimeError as error:
                errors.append(str(error))
        errors += remove_cgroups(self.cgroup_root)
        errors += self._restore_sysctls()
        self._holder, self._child, self._init_pid = None, None, 0
        (self.dir / STATE_FILE).unlink(missing_ok=True)
        if errors:
            raise SandboxError("; ".join(errors))

    @classmethod
    def attach(cls, dir: Path) -> NodeSandbox:
        """The sandbox recorded in `dir` by an earlier start (to stop it)."""
        path = Path(dir).resolve() / STATE_FILE
        try:
            state: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            raise SandboxError(f"no node sandbox is recorded in {path.parent}") from None
        sandbox = cls(Path(dir), detached=True)
        sandbox.cgroup_root = state["cgroup_root"]
        sandbox._sysctls = state["sysctls"]
        sandbox._init_pid = state.get("init_pid", 0)
        if state.get("holder"):
            sandbox._holder = processes.ProcessId(**state["holder"])
        return sandbox

    def is_running(self) -> bool:
        return self._holder is not None and self._holder.is_alive()

    # -- what callers use -------------------------------------------------------------------

    @property
    def init_pid(self) -> int:
        """The host pid of the namespace's PID 1 (the target of `nsenter`)."""
        if not self._init_pid:
            raise SandboxError("the node sandbox is not started")
        return self._init_pid

    def enter(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespaces (its working directory: the node's directory)."""
        return [
            "nsenter", f"--target={self.init_pid}", "--pid", "--net", "--mount",
            f"--wd={self.dir}", "--", *argv,
        ]  # fmt: skip

    def run(self, argv: Sequence[str], what: str, input: str | None = None) -> str:
        """Run a command inside and return its stdout; `SandboxError` when it fails."""
        result = subprocess.run(
            self.enter(argv), input=input, capture_output=True, text=True, check=False, timeout=120
        )
        if result.returncode != 0:
            raise SandboxError(
                f"{what} failed ({result.returncode}): {(result.stderr or result.stdout).strip()}"
            )
        return result.stdout

    # -- internals --------------------------------------------------------------------------

    def _find_init(self) -> int:
        assert self._holder is not None and self._child is not None
        children = Path(f"/proc/{self._holder.pid}/task/{self._holder.pid}/children")
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if self._child.poll() is not None:
                raise SandboxError(
                    f"unshare exited with status {self._child.returncode}: "
                    f"{processes.tail(self.dir / 'sandbox.log')}"
                )
            with contextlib.suppress(FileNotFoundError):
                found = children.read_text().split()
                if found:
                    return int(found[0])
            time.sleep(0.02)
        raise SandboxError("the node sandbox's init did not start within 10s")

    def _set_up(self) -> None:
        layers = self.dir / "layers"
        lines = ["set -eu", "mount --make-rshared /"]
        for path in _OVERLAID:
            upper, work = layers / path.strip("/") / "upper", layers / path.strip("/") / "work"
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            options = f"lowerdir={path},upperdir={upper},workdir={work}"
            lines.append(f"mount -t overlay overlay -o {options} {path}")
        shadows = self.dir / "sysctls"
        shadows.mkdir(exist_ok=True)
        for name in HOST_SYSCTLS:
            copy = shadows / name.replace("/", ".")
            copy.write_text(self._sysctls[name] + "\n")
            lines.append(f"mount --bind {copy} /proc/sys/{name}")
        lines += [
            "ip link set lo up",
            f"ip link add {BRIDGE} type bridge",
            f"ip addr add {NODE_IP}/{POD_SUBNET.split('/')[1]} dev {BRIDGE}",
            f"ip link set {BRIDGE} up",
            "echo 1 > /proc/sys/net/ipv4/ip_forward",
        ]
        self.run(["sh", "-c", "\n".join(lines)], "setting up the node's namespaces")

    def _restore_sysctls(self) -> list[str]:
        errors = []
        for name, value in self._sysctls.items():
            try:
                if _read_sysctl(name) != value:
                    Path(f"/proc/sys/{name}").write_text(value + "\n")
            except OSError as error:
                errors.append(f"restoring {name} to {value}: {error}")
        return errors

    def _save(self) -> None:
        state = {
            "cgroup_root": self.cgroup_root,
            "sysctls": self._sysctls,
            "holder": vars(self._holder) if self._holder else None,
            "init_pid": self._init_pid,
        }
        (self.dir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def _read_sysctl(name: str) -> str:
    return Path(f"/proc/sys/{name}").read_text().strip()


def cgroup_mounts() -> list[Path]:
    """The mount points of every cgroup hierarchy (v1 and v2) of this mount namespace."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2"):
            found.append(Path(fields[0].split()[4]))
    return found


def make_cgroups(root: str) -> None:
    """The cgroup `root` in every hierarchy (the kubelet's `cgroupRoot` must exist), its
    cpuset given the parent's CPUs and memory nodes (an empty cpuset admits no process)."""
    for mount in cgroup_mounts():
        top = mount / root.strip("/")
        top.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (mount / name).is_file() and not (top / name).read_text().strip():
                (top / name).write_text((mount / name).read_text())


def remove_cgroups(root: str) -> list[str]:
    """Kill what is left in the cgroup `root` of every hierarchy, then remove its tree."""
    errors = []
    for mount in cgroup_mounts():
        top = mount / root.strip("/")
        if not top.is_dir():
            continue
        deadline = time.monotonic() + 10.0
        while (pids := _pids(top)) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        for directory, _names, _files in os.walk(top, topdown=False):
            try:
                os.rmdir(directory)
            except OSError as error:
                errors.append(f"removing the cgroup {directory}: {error}")
    return errors


def _pids(top: Path) -> list[int]:
    pids = []
    for directory, _names, _files in os.walk(top):
        with contextlib.suppress(OSError):
            pids += [int(p) for p in Path(directory, "cgroup.procs").read_text().split()]
    return pids
