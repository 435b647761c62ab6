"""The chart's defaults run the image that `make image` builds, as the image expects: its
name and tag, its non-root user, and a read-only root filesystem with /tmp writable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from chart_helpers import CHART, DEPLOYMENT, Render, find, template

from ome_routing import __version__
from ome_routing_dev.devcluster.image import GID, NAME, UID


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = find(docs, "Deployment", DEPLOYMENT)["spec"]
    return spec["template"]["spec"]  # type: ignore[no-any-return]


def test_the_default_image_is_the_one_make_image_builds(render: Render) -> None:
    """`make image` tags its docker-archive `ome-routing:<version>`: the chart's default."""
    container = pod_spec(render())["containers"][0]
    assert container["image"] == f"{NAME}:{__version__}"
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__


def test_the_pod_runs_as_the_images_user(render: Render) -> None:
    security = pod_spec(render())["securityContext"]
    assert security == {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_the_container_is_locked_down(render: Render) -> None:
    """Read-only root, no privilege escalation, no capabilities (Pod Security "restricted")."""
    security = pod_spec(render())["containers"][0]["securityContext"]
    assert security == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_tmp_is_an_empty_dir_the_read_only_container_can_write(render: Render) -> None:
    spec = pod_spec(render())
    mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_the_schema_rejects_a_user_name_where_a_uid_belongs(helm: Path) -> None:
    """Kubernetes takes only numeric IDs: `runAsUser: ome-routing` fails before install."""
    result = template(helm, "--set-json", 'controller.podSecurityContext.runAsUser="ome-routing"')
    assert result.returncode != 0
    assert "runAsUser" in result.stderr
