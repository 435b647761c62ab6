"""The chart's pod meets the Pod Security Standard "restricted", as the API server's own
PodSecurity admission judges it: the security context that the image is run with here is
one a locked-down namespace admits."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ome_routing_dev.devcluster import LocalControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "ome-resources"

pytestmark = pytest.mark.timeout(120)


def pod_security_warnings(plane: LocalControlPlane, tmp_path: Path, *values: str) -> list[str]:
    """Server-side dry run of the chart's Deployment in a namespace that warns on
    "restricted"; the warnings PodSecurity admission gives back."""
    namespace = tmp_path.name.lower().replace("_", "-")[-40:].strip("-")
    plane.kubectl("create", "namespace", namespace)
    plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/warn=restricted")
    rendered = subprocess.run(
        [
            str(plane.tools.helm), "template", "ome", str(CHART), "--namespace", namespace,
            "--show-only", "templates/deployment.yaml", *values,
        ],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    result = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered.stdout)
    plane.kubectl("delete", "namespace", namespace, "--wait=false")
    return [line for line in result.stderr.splitlines() if "PodSecurity" in line]


def test_the_default_pod_meets_the_restricted_standard(
    control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    assert pod_security_warnings(control_plane, tmp_path) == []


def test_a_weakened_security_context_is_warned_about(
    control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    """The check above can fail: PodSecurity admission is on and reads this pod."""
    warnings = pod_security_warnings(
        control_plane, tmp_path, "--set", "controller.securityContext.allowPrivilegeEscalation=true"
    )
    assert warnings and "allowPrivilegeEscalation" in warnings[0]
