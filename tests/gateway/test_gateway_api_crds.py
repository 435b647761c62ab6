"""The Gateway API CRDs on the local control plane: `dev up --gateway-api` and the fixture's plane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ome_routing_dev.devcluster import LocalControlPlane

STANDARD_CRDS = {
    "backendtlspolicies.gateway.networking.k8s.io",
    "gatewayclasses.gateway.networking.k8s.io",
    "gateways.gateway.networking.k8s.io",
    "grpcroutes.gateway.networking.k8s.io",
    "httproutes.gateway.networking.k8s.io",
    "referencegrants.gateway.networking.k8s.io",
}


def gateway_api_crds(kubectl: Path, kubeconfig: Path) -> dict[str, dict[str, str]]:
    """The installed Gateway API CRDs: name -> their bundle version and channel annotations."""
    listed = subprocess.run(
        [str(kubectl), "get", "crd", "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        check=True,
    )
    found = {}
    for crd in json.loads(listed.stdout)["items"]:
        annotations = crd["metadata"].get("annotations", {})
        if crd["spec"]["group"] == "gateway.networking.k8s.io":
            found[crd["metadata"]["name"]] = {
                "version": annotations.get("gateway.networking.k8s.io/bundle-version", ""),
                "channel": annotations.get("gateway.networking.k8s.io/channel", ""),
            }
    return found


def test_the_plane_has_the_standard_channel_of_v1_4_0(gateway_plane: LocalControlPlane) -> None:
    crds = gateway_api_crds(gateway_plane.tools.kubectl, gateway_plane.kubeconfig)
    assert set(crds) == STANDARD_CRDS
    assert {(c["version"], c["channel"]) for c in crds.values()} == {("v1.4.0", "standard")}


def test_dev_up_installs_them_only_when_asked(tmp_path: Path) -> None:
    cli = str(Path(sys.executable).parent / "ome-routing")
    for flag, expected in (([], set()), (["--gateway-api"], STANDARD_CRDS)):
        directory = tmp_path / f"cluster{len(flag)}"
        up = subprocess.run(
            [cli, "dev", "up", "--dir", str(directory), *flag],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert up.returncode == 0, up.stderr
        try:
            plane = LocalControlPlane.attach(directory)
            assert set(gateway_api_crds(plane.tools.kubectl, plane.kubeconfig)) == expected
        finally:
            subprocess.run([cli, "dev", "down", "--dir", str(directory)], check=True)
