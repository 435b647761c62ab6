"""What the image is built from: its bill of materials against what its root filesystem really
has installed, the lock files it was built from, and a locked version gone from the archive."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from ome_routing import __version__
from ome_routing_dev.devcluster.image import ImageError, relock
from ome_routing_dev.devcluster.image_layers import base_rootfs, fetch_wheels, wheels_key

REPO = Path(__file__).resolve().parents[2]
SBOM = "usr/share/ome-routing/sbom.cdx.json"
SITES = ("usr/local/lib/python3.11/dist-packages", "usr/lib/python3/dist-packages")


def sbom(bundle: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((bundle / "rootfs" / SBOM).read_text())
    return loaded


def purls(bundle: Path, kind: str) -> list[str]:
    return [c["purl"] for c in sbom(bundle)["components"] if c["purl"].startswith(f"pkg:{kind}/")]


def dpkg_installed(rootfs: Path) -> set[tuple[str, str, str]]:
    """(package, version, architecture) of every paragraph dpkg marks `install ok installed`."""
    installed = set()
    for paragraph in (rootfs / "var/lib/dpkg/status").read_text().split("\n\n"):
        fields = dict(re.findall(r"^(Package|Version|Architecture|Status): (.*)$", paragraph, re.M))
        if fields.get("Status") == "install ok installed":
            installed.add((fields["Package"], fields["Version"], fields["Architecture"]))
    return installed


def dist_infos(rootfs: Path) -> set[tuple[str, str]]:
    """(name, version) of every distribution the image's Python can import metadata for."""
    found = set()
    for site in SITES:
        for info in (rootfs / site).glob("*.dist-info"):
            metadata = (info / "METADATA").read_text()
            name = re.search(r"^Name: (.*)$", metadata, re.M)
            version = re.search(r"^Version: (.*)$", metadata, re.M)
            assert name and version, info
            found.add((name.group(1).strip(), version.group(1).strip()))
    return found


def lock_lines(name: str) -> list[str]:
    text = (REPO / "image" / name).read_text().splitlines()
    return [line for line in text if line and not line.startswith("#")]


def test_the_bill_of_materials_lists_every_debian_package_dpkg_has_installed(
    bundle: Path,
) -> None:
    listed = set()
    for purl in purls(bundle, "deb"):
        match = re.fullmatch(r"pkg:deb/debian/([^@]+)@([^?]+)\?arch=([^&]+)&distro=debian-12", purl)
        assert match, purl
        listed.add((match.group(1), unquote(match.group(2)), match.group(3)))
    installed = dpkg_installed(bundle / "rootfs")
    assert len(installed) > 50  # the essential set, Python and ca-certificates
    assert listed == installed
    assert {line.split()[0] for line in lock_lines("debian.lock")} >= {"python3.11", "libc6"}
    assert {tuple(line.split()) for line in lock_lines("debian.lock")} == installed


def test_the_bill_of_materials_lists_every_python_distribution_in_the_image(
    bundle: Path,
) -> None:
    listed = set()
    for component in sbom(bundle)["components"]:
        if component["purl"].startswith("pkg:pypi/"):
            assert component["purl"].endswith(f"@{component['version']}"), component
            listed.add((component["name"], component["version"]))
    installed = dist_infos(bundle / "rootfs")
    assert ("ome-routing", __version__) in installed
    assert listed == installed
    locked = {tuple(line.split()[0].split("==")) for line in lock_lines("python.lock")}
    normalised = {(re.sub(r"[-_.]+", "-", n).lower(), v) for n, v in installed}
    assert normalised == (locked - {("pip", v) for _, v in locked}) | {("ome-routing", __version__)}


def test_the_bill_of_materials_is_cyclonedx_dated_by_the_commit(bundle: Path) -> None:
    document = sbom(bundle)
    assert (document["bomFormat"], document["specVersion"]) == ("CycloneDX", "1.5")
    epoch = subprocess.run(
        ["git", "log", "-1", "--format=%ct"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    date = datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert document["metadata"]["timestamp"] == date
    assert document["metadata"]["component"]["name"] == "ome-routing"
    names = [(c["purl"].split("/")[0], c["name"].lower()) for c in document["components"]]
    assert names == sorted(names, key=lambda n: (n[0] != "pkg:deb", n[1]))


def test_a_locked_version_gone_from_the_archive_fails_naming_it_and_the_relock(
    tmp_path: Path,
) -> None:
    """The archive serves only current versions: a lock older than it names what is gone."""
    (tmp_path / "image").mkdir()
    lock = (REPO / "image" / "debian.lock").read_text()
    gone = re.sub(r"^libc6 \S+ ", "libc6 2.36-9+deb12u0 ", lock, flags=re.M)
    assert gone != lock
    (tmp_path / "image" / "debian.lock").write_text(gone)
    (tmp_path / "cache").mkdir()
    with pytest.raises(ImageError) as raised:
        base_rootfs(tmp_path, tmp_path / "cache", lambda _message: None)
    message = str(raised.value)
    assert "libc6 2.36-9+deb12u0 of image/debian.lock is no longer in the archive" in message
    assert "`ome-routing dev image --relock`" in message
    assert not list((tmp_path / "cache").glob("*base-*"))


def test_a_wheel_whose_hash_differs_from_the_lock_is_refused(tmp_path: Path) -> None:
    """PyPI (or a mirror) serving other bytes under a locked name and version stops the build."""
    (tmp_path / "image").mkdir()
    (line,) = [line for line in lock_lines("python.lock") if line.startswith("idna==")]
    wrong = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, line)
    (tmp_path / "image" / "python.lock").write_text(wrong + "\n")
    with pytest.raises(ImageError) as raised:
        fetch_wheels(tmp_path, tmp_path / "cache", lambda _message: None)
    assert "pip download --require-hashes failed" in str(raised.value)
    assert "0" * 64 in str(raised.value)
    assert not (tmp_path / "cache" / f"wheels-{wheels_key(tmp_path)}" / ".complete").exists()


def test_relock_writes_both_locks_into_the_checkout(tmp_path: Path) -> None:
    """A checkout with no locks gets both; PyPI's files for pinned versions never change, so
    the wheels' lock comes out as the committed one."""
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(REPO / name, tmp_path / name)
    removed, added = relock(tmp_path, lambda _message: None)
    python = (tmp_path / "image" / "python.lock").read_text()
    assert python == (REPO / "image" / "python.lock").read_text()
    debian = [line.split() for line in lock_lines("debian.lock")]
    relocked = [
        line.split()
        for line in (tmp_path / "image" / "debian.lock").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert {"python3.11", "ca-certificates", "libc6"} <= {name for name, *_ in relocked}
    assert {len(fields) for fields in relocked} == {3}
    assert [name for name, *_ in relocked] == sorted(name for name, *_ in relocked)
    assert len(relocked) == len(debian)  # the same set of packages, whatever their versions
    assert removed == []
    assert len(added) == len(relocked) + len(python.splitlines()) - 2  # less its header
