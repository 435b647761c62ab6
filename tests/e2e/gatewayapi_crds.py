"""The Gateway API standard-channel CRDs (v1.4.0) on the local control plane, for tests.

They come from the Go module `sigs.k8s.io/gateway-api`, fetched through the Go module
proxy (`go mod download`) into the module cache, as the control plane's own binaries are.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path

from ome_routing.devcluster import LocalControlPlane

MODULE = "sigs.k8s.io/gateway-api@v1.4.0"


@cache
def crd_directory() -> Path:
    """`config/crd/standard` of the module, downloaded once into Go's module cache."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", MODULE], capture_output=True, text=True, check=True
    )
    return Path(json.loads(result.stdout)["Dir"]) / "config" / "crd" / "standard"


def install_gateway_api(plane: LocalControlPlane) -> None:
    """Apply the CRDs (server-side: they are too large for the last-applied annotation)."""
    plane.kubectl("apply", "--server-side", "-f", str(crd_directory()))
    plane.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/httproutes.gateway.networking.k8s.io",
        "crd/backendtlspolicies.gateway.networking.k8s.io",
    )
