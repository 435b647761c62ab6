"""The image's lock files and its bill of materials, on files alone (no build, no network)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ome_routing_dev.devcluster.image_locks import (
    DebianPackage,
    LockError,
    missing_version,
    parse_dpkg_status,
    read_debian_lock,
    read_python_lock,
    runtime_requirements,
)
from ome_routing_dev.devcluster.image_sbom import bill_of_materials

REPO = Path(__file__).resolve().parents[2]

STATUS = """\
Package: libc6
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 2.36-9+deb12u14
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.

Package: bsdutils
Status: install ok installed
Architecture: amd64
Version: 1:2.38.1-5+deb12u3

Package: old-thing
Status: deinstall ok config-files
Architecture: all
Version: 1.0
"""


def constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return pins


def test_every_locked_wheel_is_at_constraints_txts_version() -> None:
    """A pin moved in constraints.txt without a relock would give the image other versions
    than the ones the tests run on."""
    pins = constraints()
    locked = {wheel.name: wheel.version for wheel in read_python_lock(REPO)}
    assert locked.pop("pip") == "26.3"
    assert locked == {name: pins[name] for name in locked}
    direct = {re.split(r"[<>=!~;\s\[]", r)[0].lower() for r in runtime_requirements(REPO)}
    assert {"aiohttp", "lightkube", "prometheus-client", "uvloop"} <= direct
    assert direct <= set(locked)


def test_the_debian_lock_is_sorted_and_has_python_and_the_certificates() -> None:
    packages = read_debian_lock(REPO)
    assert packages == sorted(set(packages))
    names = {package.name for package in packages}
    assert {"python3.11", "ca-certificates", "libc6", "base-files"} <= names
    assert {package.architecture for package in packages} <= {"amd64", "all"}


def test_a_malformed_lock_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "debian.lock").write_text("# header\nlibc6 2.36-9+deb12u14\n")
    with pytest.raises(LockError, match=r"^image/debian.lock:2: expected 'name version arch"):
        read_debian_lock(tmp_path)
    with pytest.raises(LockError, match=r"image/python.lock is missing; run `ome-routing dev"):
        read_python_lock(tmp_path)


def test_only_installed_packages_count_from_dpkgs_status() -> None:
    assert parse_dpkg_status(STATUS) == [
        DebianPackage("bsdutils", "1:2.38.1-5+deb12u3", "amd64"),
        DebianPackage("libc6", "2.36-9+deb12u14", "amd64"),
    ]


def test_apts_message_for_a_version_gone_names_package_and_version() -> None:
    output = "Reading package lists...\nE: Version '2.36-9+deb12u0' for 'libc6' was not found\n"
    assert missing_version(output) == ("libc6", "2.36-9+deb12u0")
    assert missing_version("E: Unable to locate package libc7") is None


def test_the_bill_of_materials_is_the_same_bytes_for_the_same_files(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "var/lib/dpkg").mkdir(parents=True)
    (rootfs / "var/lib/dpkg/status").write_text(STATUS)
    for name, version in (("PyYAML", "6.0.3"), ("aiohttp", "3.14.5")):
        info = rootfs / f"usr/local/lib/python3.11/dist-packages/{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    first = bill_of_materials(rootfs, 1764720000)
    assert bill_of_materials(rootfs, 1764720000) == first
    document = json.loads(first)
    assert document["metadata"]["timestamp"] == "2025-12-03T00:00:00Z"
    assert [c["purl"] for c in document["components"]] == [
        "pkg:deb/debian/bsdutils@1%3A2.38.1-5%2Bdeb12u3?arch=amd64&distro=debian-12",
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64&distro=debian-12",
        "pkg:pypi/aiohttp@3.14.5",
        "pkg:pypi/pyyaml@6.0.3",
    ]
    assert [c["name"] for c in document["components"]] == [
        "bsdutils",
        "libc6",
        "aiohttp",
        "PyYAML",
    ]
