"""The local gateway's inputs: the Traefik binary and the Gateway API CRDs, installed once.

- Traefik is built from the Go module proxy by the helper module `tools/traefik/`
  (`tools/traefik/build.sh`), at the version its go.mod/go.sum pin
  (`github.com/traefik/traefik/v3` v3.6). A cold build takes minutes; the binary is cached.
- The Gateway API CRDs are the standard channel of the Go module `sigs.k8s.io/gateway-api`
  (`config/crd/standard/`, BackendTLSPolicy included), at the version the same go.mod pins
  (Traefik v3.6 requires v1.4.0), fetched with `go mod download`, so that go.sum checks them.

Both land under the cache directory (see `tools.cache_dir`) in a folder named for what they
were made from, with a stamp written last, as the control plane's binaries do.

Errors: `ToolsError` (a step failed; its message names the step and quotes its output).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ome_routing.devcluster.tools import (
    Progress,
    ToolsError,
    _complete,
    _locked,
    _require,
    build_staged,
    cache_dir,
    tools_module_dir,
)

TRAEFIK_MODULE = "github.com/traefik/traefik/v3"
GATEWAY_API_MODULE = "sigs.k8s.io/gateway-api"
_BUILD_INPUTS = ("go.mod", "go.sum", "build.sh")
_STAMP = ".complete"


class KubectlRunner(Protocol):
    """`LocalControlPlane.kubectl`: runs kubectl against the control plane, raising on failure."""

    def __call__(self, *args: str) -> Any: ...


def traefik_module_dir() -> Path:
    """The repository's `tools/traefik/` folder (the Go helper module that builds Traefik)."""
    return tools_module_dir() / "traefik"


def pinned_version(module: str, module_dir: Path | None = None) -> str:
    """The version of `module` that tools/traefik/go.mod requires, e.g. `v3.6.12`."""
    go_mod = (module_dir or traefik_module_dir()) / "go.mod"
    for line in go_mod.read_text().splitlines():
        fields = line.split()
        if fields[:1] == ["require"]:
            fields = fields[1:]
        if len(fields) >= 2 and fields[0] == module:
            return fields[1]
    raise ToolsError(f"{go_mod} does not require {module}")


def ensure_traefik(progress: Progress | None = None, cache: Path | None = None) -> Path:
    """The Traefik binary, built once from the pinned helper module."""
    say = progress or (lambda _message: None)
    root = cache or cache_dir()
    module_dir = traefik_module_dir()
    version = pinned_version(TRAEFIK_MODULE, module_dir)
    target = root / f"traefik-{version}-{_build_key(module_dir)}"
    binary = target / "traefik"
    if _complete(target, binary):
        return binary
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock", say):
        if not _complete(target, binary):
            _build_traefik(module_dir, target, version, say)
    return binary


def ensure_gateway_api_crds(progress: Progress | None = None, cache: Path | None = None) -> Path:
    """A folder holding the Gateway API standard-channel CRD manifests (one file per CRD)."""
    say = progress or (lambda _message: None)
    root = cache or cache_dir()
    module_dir = traefik_module_dir()
    version = pinned_version(GATEWAY_API_MODULE, module_dir)
    target = root / f"gateway-api-{version}-standard"
    if _complete(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock", say):
        if not _complete(target):
            _fetch_crds(module_dir, target, version, say)
    return target


def _build_key(module_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in _BUILD_INPUTS:
        digest.update(name.encode() + b"\0" + (module_dir / name).read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def _build_traefik(module_dir: Path, target: Path, version: str, say: Progress) -> None:
    _require("go", "to build Traefik (Go 1.25 or newer)")
    say(
        f"building Traefik {version} from the Go module proxy into {target} "
        "(once; a first build takes several minutes)"
    )
    started = time.monotonic()
    build_staged(
        module_dir, target, f"{TRAEFIK_MODULE} {version}", say, label=lambda _stage: "traefik"
    )
    say(f"Traefik ready in {target} ({time.monotonic() - started:.0f}s)")


def _fetch_crds(module_dir: Path, target: Path, version: str, say: Progress) -> None:
    go = _require("go", "to fetch the Gateway API CRDs (go mod download)")
    say(f"fetching the Gateway API CRDs: go mod download {GATEWAY_API_MODULE}@{version}")
    result = subprocess.run(
        [go, "mod", "download", "-json", GATEWAY_API_MODULE],
        cwd=module_dir,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    if result.returncode != 0:
        raise ToolsError(f"go mod download {GATEWAY_API_MODULE} failed:\n{result.stderr}")
    source = Path(json.loads(result.stdout)["Dir"]) / "config" / "crd" / "standard"
    manifests = sorted(source.glob("*.yaml"))
    if not manifests:
        raise ToolsError(f"{source} holds no CRD manifests")
    shutil.rmtree(target, ignore_errors=True)
    staged = target.with_name(f".{target.name}.partial")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    for manifest in manifests:
        shutil.copyfile(manifest, staged / manifest.name)
    (staged / _STAMP).write_text(f"{GATEWAY_API_MODULE} {version} config/crd/standard\n")
    staged.rename(target)


def install_gateway_api_crds(
    kubectl: KubectlRunner,
    wait_established: Callable[[Sequence[str], float], None],
    progress: Progress | None = None,
    timeout: float = 60.0,
) -> list[Path]:
    """Apply the Gateway API CRDs and wait (`LocalControlPlane.wait_established`) for each.

    Server-side apply: the HTTPRoute CRD (about 340 kB) is larger than the annotation a
    client-side apply would store it in (256 kB).
    """
    manifests = sorted(ensure_gateway_api_crds(progress).glob("*.yaml"))
    files = [arg for path in manifests for arg in ("-f", str(path))]
    kubectl("apply", "--server-side", "--field-manager=ome-routing-dev", *files)
    wait_established(files, timeout)
    return manifests
