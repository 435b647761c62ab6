"""ome-routing installed next to OME v1.3 with docs/install.md's commands: nothing of OME's is
changed or adopted.

OME's objects are those its v1.3 chart creates (fixtures/ome-v1.3/ome-resources.yaml, in
namespace `ome`), and its CRDs are the local control plane's (the same three names). The
install is the `helm upgrade --install` line of install.md's "Next to OME" section, run as
written from the repository's root with the real helm: in its own namespace, as the page
says, and in OME's namespace too, where a shared name would collide.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ome_routing_dev.devcluster import LocalControlPlane

ROOT = Path(__file__).resolve().parents[2]
OME_FIXTURE = Path(__file__).parent / "fixtures" / "ome-v1.3" / "ome-resources.yaml"
INSTALL_MD = ROOT / "docs" / "install.md"
OME_NAMESPACE = "ome"
OME_CRDS = ["inferenceservices.ome.io", "trafficmaps.ome.io", "workloadclusters.ome.io"]
HELM_OWNERSHIP = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")

pytestmark = pytest.mark.timeout(180)


def documented_install() -> list[str]:
    """The `helm upgrade --install` command of install.md's "Next to OME" section."""
    text = INSTALL_MD.read_text()
    section = text[text.index("## Next to OME") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    lines = [
        line for block in blocks for line in block.replace("\\\n", " ").splitlines()
        if line.startswith("helm upgrade --install")
    ]  # fmt: skip
    assert len(lines) == 1, lines
    return shlex.split(lines[0].split("#")[0])


def helm(plane: LocalControlPlane, *args: str) -> str:
    result = subprocess.run(
        [str(plane.tools.helm), *args],
        cwd=ROOT,
        env=plane.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"helm {shlex.join(args)}: {result.stderr or result.stdout}"
    return result.stdout


def ome_objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(OME_FIXTURE.read_text()) if doc]


def state(plane: LocalControlPlane) -> dict[str, dict[str, Any]]:
    """resourceVersion, labels, annotations and owners of each of OME's objects, now."""
    refs = [f"customresourcedefinition/{name}" for name in OME_CRDS]
    for obj in ome_objects():
        group = obj["apiVersion"].rpartition("/")[0]
        refs.append(f"{obj['kind']}{'.' + group if group else ''}/{obj['metadata']['name']}")
    found: dict[str, dict[str, Any]] = {}
    listed = json.loads(plane.kubectl("get", *refs, "-n", OME_NAMESPACE, "-o", "json").stdout)
    for item in listed["items"]:
        meta = item["metadata"]
        key = f"{item['kind']}/{meta.get('namespace', '')}/{meta['name']}"
        found[key] = {
            "resourceVersion": meta["resourceVersion"],
            "labels": meta.get("labels", {}),
            "annotations": meta.get("annotations", {}),
            "ownerReferences": meta.get("ownerReferences", []),
        }
    assert len(found) == len(ome_objects()) + len(OME_CRDS), sorted(found)
    return found


@pytest.fixture
def ome_installed(control_plane: LocalControlPlane) -> Iterator[dict[str, dict[str, Any]]]:
    """OME's objects in `ome`, as its chart creates them; deleted afterwards."""
    if control_plane.kubectl("get", "namespace", OME_NAMESPACE, check=False).returncode != 0:
        control_plane.kubectl("create", "namespace", OME_NAMESPACE)
    control_plane.kubectl("apply", "-n", OME_NAMESPACE, "-f", str(OME_FIXTURE))
    try:
        yield state(control_plane)
    finally:
        control_plane.kubectl(
            "delete", "-n", OME_NAMESPACE, "-f", str(OME_FIXTURE), "--ignore-not-found",
            "--wait=false",
        )  # fmt: skip


@pytest.mark.parametrize("namespace", ["documented", OME_NAMESPACE])
def test_installing_next_to_ome_changes_and_adopts_nothing_of_omes(
    control_plane: LocalControlPlane, ome_installed: dict[str, dict[str, Any]], namespace: str
) -> None:
    command = documented_install()
    assert command[:3] == ["helm", "upgrade", "--install"]
    release = command[3]
    ours = command[command.index("--namespace") + 1]
    assert (release, ours) != ("ome", "ome"), "the page must not install as OME's release"
    if namespace != "documented":  # the same values, in OME's own namespace
        command[command.index("--namespace") + 1] = ours = namespace
    try:
        helm(control_plane, *command[1:])
        manifest = [
            d for d in yaml.safe_load_all(helm(control_plane, "get", "manifest", release, "-n", ours))
            if d
        ]  # fmt: skip

        assert state(control_plane) == ome_installed
        for key, meta in ome_installed.items():
            assert not set(HELM_OWNERSHIP) & set(meta["annotations"]), key

        # nothing of ours has one of OME's names, in any namespace, nor is a CRD
        names = {(d["kind"], d["metadata"]["name"]) for d in manifest}
        omes = {(o["kind"], o["metadata"]["name"]) for o in ome_objects()}
        assert names and not names & omes
        assert not [d for d in manifest if d["kind"] == "CustomResourceDefinition"]

        # our selectors (the Deployment's is the docs' `kubectl logs -l`) find none of OME's
        [deployment] = [d for d in manifest if d["kind"] == "Deployment"]
        selector = ",".join(
            f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
        )
        for kinds in ("pods", "deployments,services,serviceaccounts,configmaps,daemonsets"):
            found = control_plane.kubectl("get", kinds, "-A", "-l", selector, "-o", "name").stdout
            assert all(
                not line.endswith(tuple(f"/{o['metadata']['name']}" for o in ome_objects()))
                for line in found.splitlines()
            ), found
        assert (
            control_plane.kubectl("get", "pods", "-A", "-l", selector, "-o", "name").stdout.strip()
            == ""
        )  # OME's pod is not ours (no node runs ours here)

        # OME's selector `control-plane=ome-controller-manager` finds nothing of ours
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert "control-plane" not in pod_labels
        found = control_plane.kubectl(
            "get", "deployments,services,serviceaccounts,configmaps", "-n", ours,
            "-l", "control-plane=ome-controller-manager", "-o", "name",
        ).stdout  # fmt: skip
        assert all("ome-controller-manager" in line for line in found.splitlines()), found

        helm(control_plane, "uninstall", release, "-n", ours, "--wait")
        assert state(control_plane) == ome_installed
    finally:
        subprocess.run(
            [str(control_plane.tools.helm), "uninstall", release, "-n", ours, "--ignore-not-found"],
            env=control_plane.env(), capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        if ours != OME_NAMESPACE:
            control_plane.delete_namespace(ours)
