"""The local node's binaries and its pause image, installed once (`ome-routing dev up --node`).

- kubelet, kube-controller-manager, kube-scheduler and kube-proxy: built by the Go helper
  module `tools/` (`tools/build.sh --node`), from the same `k8s.io/kubernetes` release as
  kube-apiserver (its go.mod names them with `tool` lines).
- containerd v2, its runc shim and ctr: built by `tools/containerd/` from the Go module proxy.
- runc, the CNI plugins (`containernetworking-plugins`), iptables, and umoci and skopeo (to
  pack the pause image): Debian's, installed with apt-get when missing.
- The pause image: the static Go program of `tools/pause/`, packed by umoci into a one-layer
  image `localhost/ome-routing/pause:<key>` and written by skopeo as a docker-archive that
  `ctr images import` loads.

Each lands under the cache directory in a folder named for its inputs, with a stamp written
last, as the control plane's binaries do. Errors: `ToolsError`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ome_routing_dev.devcluster.debian import install_packages, missing_packages
from ome_routing_dev.devcluster.tools import (
    Progress,
    ToolsError,
    _complete,
    _locked,
    _require,
    build_staged,
    cache_dir,
    pinned_kubernetes_version,
    tools_module_dir,
)

NODE_BINARIES = ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")
CONTAINERD_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr")
CONTAINERD_MODULE = "github.com/containerd/containerd/v2"
#: Debian's packages the node needs: the program each one brings, and its name.
DEBIAN_PACKAGES = {
    "runc": "runc",
    "iptables": "iptables",
    "umoci": "umoci",
    "skopeo": "skopeo",
}
CNI_DIR = Path("/usr/lib/cni")  # where Debian's containernetworking-plugins installs
CNI_PACKAGE = "containernetworking-plugins"
PAUSE_REPOSITORY = "localhost/ome-routing/pause"
PAUSE_USER = "65535:65535"  # as Kubernetes' pause image runs
_STAMP = ".complete"


@dataclass(frozen=True)
class NodeTools:
    """Absolute paths of the node's binaries and its pause image."""

    kubelet: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kube_proxy: Path
    containerd: Path
    containerd_shim: Path
    ctr: Path
    runc: Path
    iptables: Path
    cni_dir: Path
    pause_archive: Path
    pause_image: str

    @property
    def containerd_dir(self) -> Path:
        """The folder holding containerd and its shim (to put first on containerd's PATH)."""
        return self.containerd.parent


def ensure_node_tools(progress: Progress | None = None, cache: Path | None = None) -> NodeTools:
    """Return the node's binaries and pause image, building whatever is missing (once)."""
    say = progress or (lambda _message: None)
    root = cache or cache_dir()
    tools_dir = tools_module_dir()
    containerd_module = tools_dir / "containerd"
    pause_module = tools_dir / "pause"
    kube_dir = root / f"kube-node-{pinned_kubernetes_version(tools_dir)}-{_key(tools_dir)}"
    containerd_version = _required_version(containerd_module, CONTAINERD_MODULE)
    runtime_dir = root / f"containerd-{containerd_version}-{_key(containerd_module)}"
    pause_key = _key(pause_module, ("go.mod", "main.go"))
    pause_dir = root / f"pause-{pause_key}"
    kube = {name: kube_dir / name for name in NODE_BINARIES}
    runtime = {name: runtime_dir / name for name in CONTAINERD_BINARIES}
    pause_archive = pause_dir / "pause.docker.tar"
    ready = (
        _complete(kube_dir, *kube.values())
        and _complete(runtime_dir, *runtime.values())
        and _complete(pause_dir, pause_archive)
    )
    if not ready:
        root.mkdir(parents=True, exist_ok=True)
        with _locked(root / ".lock", say):
            if not _complete(kube_dir, *kube.values()):
                _build(tools_dir, kube_dir, "kubelet, kube-controller-manager, kube-scheduler "
                       "and kube-proxy", say, args=("--node",))  # fmt: skip
            if not _complete(runtime_dir, *runtime.values()):
                _build(containerd_module, runtime_dir, f"containerd {containerd_version}", say)
    ensure_debian_packages(say)
    if not _complete(pause_dir, pause_archive):
        with _locked(root / ".lock", say):
            if not _complete(pause_dir, pause_archive):
                _build_pause(pause_module, pause_dir, f"{PAUSE_REPOSITORY}:{pause_key}", say)
    return NodeTools(
        kubelet=kube["kubelet"],
        kube_controller_manager=kube["kube-controller-manager"],
        kube_scheduler=kube["kube-scheduler"],
        kube_proxy=kube["kube-proxy"],
        containerd=runtime["containerd"],
        containerd_shim=runtime["containerd-shim-runc-v2"],
        ctr=runtime["ctr"],
        runc=Path(_which("runc")),
        iptables=Path(_which("iptables")),
        cni_dir=CNI_DIR,
        pause_archive=pause_archive,
        pause_image=f"{PAUSE_REPOSITORY}:{pause_key}",
    )


def ensure_debian_packages(say: Progress) -> None:
    """runc, the CNI plugins, iptables, umoci and skopeo, with apt-get when one is missing."""
    missing = missing_packages(DEBIAN_PACKAGES)
    if not (CNI_DIR / "bridge").is_file() or not (CNI_DIR / "host-local").is_file():
        missing.append(CNI_PACKAGE)
    install_packages(missing, say, needed_by="the local node")


def _which(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise ToolsError(f"{program} is not on PATH after installing it")
    return found


def _key(module_dir: Path, names: tuple[str, ...] = ("go.mod", "go.sum", "build.sh")) -> str:
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + (module_dir / name).read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def _required_version(module_dir: Path, module: str) -> str:
    go_mod = module_dir / "go.mod"
    for line in go_mod.read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["require"]:
            fields = fields[1:]
        if len(fields) >= 2 and fields[0] == module:
            return fields[1]
    raise ToolsError(f"{go_mod} does not require {module}")


def _build(
    module_dir: Path, target: Path, what: str, say: Progress, args: tuple[str, ...] = ()
) -> None:
    _require("go", f"to build {what} (Go 1.25 or newer)")
    say(f"building {what} from the Go module proxy into {target} (once; minutes when cold)")
    started = time.monotonic()
    build_staged(
        module_dir,
        target,
        what,
        say,
        label=lambda stage: stage.split(" (")[0],
        quiet=("go: ", "pin-kubernetes:"),
        args=args,
    )
    say(f"{what} ready in {target} ({time.monotonic() - started:.0f}s)")


def _build_pause(module_dir: Path, target: Path, name: str, say: Progress) -> None:
    """The pause program, static, as the one file of a one-layer image `name`."""
    _require("go", "to build the pause program")
    say(f"building the pause image {name}")
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".pause-") as scratch:
        work = Path(scratch)
        staged, layout, bundle = work / "out", work / "oci", work / "bundle"
        staged.mkdir()
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
        binary = work / "pause"
        _run(
            ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(binary), "."],
            "go build (pause)",
            cwd=module_dir,
            env=env,
        )
        image = f"{layout}:{name.rsplit(':', 1)[1]}"
        _run(["umoci", "init", "--layout", str(layout)], "umoci init")
        _run(["umoci", "new", "--image", image], "umoci new")
        _run(["umoci", "unpack", "--image", image, str(bundle)], "umoci unpack")
        shutil.copy(binary, bundle / "rootfs" / "pause")
        (bundle / "rootfs" / "pause").chmod(0o755)
        _run(["umoci", "repack", "--image", image, str(bundle)], "umoci repack")
        _run(
            ["umoci", "config", "--image", image, "--config.entrypoint=/pause",
             f"--config.user={PAUSE_USER}"],
            "umoci config",
        )  # fmt: skip
        archive = staged / "pause.docker.tar"
        _run(
            ["skopeo", "copy", "--quiet", f"oci:{image}", f"docker-archive:{archive}:{name}"],
            "skopeo copy",
        )
        (staged / _STAMP).write_text(f"{name}\n")
        staged.rename(target)


def _run(
    command: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> None:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-3000:]
        raise ToolsError(f"{what} failed ({result.returncode}): {' '.join(command)}\n{output}")
