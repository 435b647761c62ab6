"""What the image is: its configuration and labels, what its root filesystem leaves out, its
docker-archive's name, and one digest per commit."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ome_routing import __version__
from ome_routing_dev.devcluster.image import GID, NAME, UID, Image, build_image

REPO = Path(__file__).resolve().parents[2]


def blob(layout: Path, digest: str) -> dict[str, Any]:
    algorithm, _, value = digest.partition(":")
    loaded: dict[str, Any] = json.loads((layout / "blobs" / algorithm / value).read_text())
    return loaded


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_config_names_the_user_the_entrypoint_and_the_labels(image: Image) -> None:
    manifest = blob(image.layout, image.digest)
    config = blob(image.layout, manifest["config"]["digest"])
    settings = config["config"]
    assert settings["User"] == f"{UID}:{GID}"
    assert settings["Entrypoint"] == [NAME]
    assert "PYTHONDONTWRITEBYTECODE=1" in settings["Env"]
    labels = settings["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.revision"].removesuffix("-dirty") == git(
        "rev-parse", "HEAD"
    )
    commit_date = datetime.fromtimestamp(int(git("log", "-1", "--format=%ct")), UTC)
    assert config["created"] == commit_date.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert labels["org.opencontainers.image.created"] == config["created"]


def test_the_image_has_two_layers_debian_then_the_project(image: Image) -> None:
    manifest = blob(image.layout, image.digest)
    config = blob(image.layout, manifest["config"]["digest"])
    assert len(manifest["layers"]) == 2
    steps = [h["created_by"] for h in config["history"] if not h.get("empty_layer")]
    assert steps[0].startswith("mmdebstrap") and steps[1].startswith(f"pip install {NAME}")


def test_the_root_filesystem_has_no_shell_compiler_pip_or_docs(bundle: Path) -> None:
    rootfs = bundle / "rootfs"
    for absent in (
        "usr/bin/sh",
        "usr/bin/bash",
        "usr/bin/dash",
        "usr/bin/gcc",
        "usr/bin/cc",
        "usr/bin/apt-get",
        "usr/local/lib/python3.11/dist-packages/pip",
        "tmp/wheels",
    ):
        assert not (rootfs / absent).exists(), absent
    assert not list((rootfs / "var/cache/apt").glob("**/*.deb"))
    docs = {p.name for p in (rootfs / "usr/share/doc").rglob("*") if p.is_file()}
    assert docs == {"copyright"}
    for excluded in ("man", "locale"):
        assert not [p for p in (rootfs / "usr/share" / excluded).rglob("*") if p.is_file()]
    assert (rootfs / "usr/local/bin" / NAME).is_file()
    assert f"{NAME}:x:{UID}:{GID}:" in (rootfs / "etc/passwd").read_text()


def test_the_docker_archive_carries_the_charts_default_name(image: Image) -> None:
    """`ome-routing:0.1.0` in full, as a kubelet looks the chart's default image up."""
    with tarfile.open(image.archive) as archive:
        member = archive.extractfile("manifest.json")
        assert member is not None
        manifest = json.load(member)
    assert manifest[0]["RepoTags"] == [f"docker.io/library/{NAME}:{__version__}"]


def test_building_the_same_commit_again_gives_the_same_digest(image: Image) -> None:
    """Every date in the image is the commit's (or the Debian snapshot's), and the .pyc files
    are hash-based: a rebuild from the cached Debian root filesystem and wheels is
    byte-identical."""
    again = build_image(REPO, force=True)
    assert again.digest == image.digest


def test_make_images_command_prints_where_the_image_is(image: Image) -> None:
    """`ome-routing dev image`, what `make image` runs: a cache hit prints the same image."""
    result = subprocess.run(
        [sys.executable, "-m", "ome_routing.cli.main", "dev", "image", "--source", str(REPO)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = dict(line.split(maxsplit=1) for line in result.stdout.splitlines())
    assert rows == {
        "oci": image.reference,
        "digest": image.digest,
        "docker-archive": str(image.archive),
    }
