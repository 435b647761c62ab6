"""The image's bill of materials: CycloneDX JSON of what its root filesystem has installed.

Written into the image at `SBOM_PATH` by `image_layers.install_wheels`, from the image's own
root filesystem rather than from the lock files: every Debian package that dpkg's status
file says is installed (name, version, architecture) and every Python distribution with a
`.dist-info` in a site directory (name, version). The document is a function of those
files and the commit's date alone (components sorted, no serial number, the timestamp the
commit's), so it does not change the image's digest from one build to the next.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import quote

from ome_routing import __version__
from ome_routing_dev.devcluster.image_locks import parse_dpkg_status

SBOM_PATH = "/usr/share/ome-routing/sbom.cdx.json"
#: Where the image's Python finds distributions: pip's installs, then Debian's.
SITE_DIRS = ("/usr/local/lib/python3.11/dist-packages", "/usr/lib/python3/dist-packages")
_DPKG_STATUS = "var/lib/dpkg/status"


def python_distributions(rootfs: Path) -> list[tuple[str, str]]:
    """(name, version) of every `.dist-info` in the image's site directories, sorted."""
    found = set()
    for site in SITE_DIRS:
        for info in sorted((rootfs / site.lstrip("/")).glob("*.dist-info")):
            headers = HeaderParser().parsestr((info / "METADATA").read_text(errors="replace"))
            found.add((str(headers["Name"]), str(headers["Version"])))
    return sorted(found, key=lambda item: (item[0].lower(), item[1]))


def bill_of_materials(rootfs: Path, epoch: int) -> bytes:
    """The CycloneDX 1.5 document of `rootfs`, dated `epoch` (SOURCE_DATE_EPOCH)."""
    debian = parse_dpkg_status((rootfs / _DPKG_STATUS).read_text())
    components = [
        _component(
            package.name,
            package.version,
            f"pkg:deb/debian/{package.name}@{quote(package.version, safe='')}"
            f"?arch={package.architecture}&distro=debian-12",
        )
        for package in debian
    ]
    components += [
        _component(name, version, f"pkg:pypi/{_pypi_name(name)}@{quote(version, safe='')}")
        for name, version in python_distributions(rootfs)
    ]
    document = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "timestamp": datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "component": {
                "type": "container",
                "bom-ref": f"pkg:oci/ome-routing@{__version__}",
                "name": "ome-routing",
                "version": __version__,
            },
        },
        "components": components,
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def _component(name: str, version: str, purl: str) -> dict[str, str]:
    return {"type": "library", "bom-ref": purl, "name": name, "version": version, "purl": purl}


def _pypi_name(name: str) -> str:
    return "-".join(name.replace("_", "-").replace(".", "-").lower().split("-"))
