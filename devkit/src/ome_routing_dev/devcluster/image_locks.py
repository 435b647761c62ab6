"""The image's two lock files: the exact Debian packages and Python wheels it is built from.

    image/debian.lock   one `name version architecture` a line, sorted by name
    image/python.lock   one `name==version --hash=sha256:...` a line (pip's hash-checking
                        mode), sorted by name; pip's own wheel, which runs the install, too

Both are committed, so every builder of one commit installs the same files: the build
installs exactly the locked Debian versions (mmdebstrap's `custom` variant, every package
given as `name=version`) and the locked wheels with `pip --require-hashes`.
`ome-routing dev image --relock` (`image_layers.relock`) resolves them again from the current archive
and PyPI: that is how the image takes security updates, on purpose, in a commit.

Debian's archive serves only each suite's current versions; when a locked one has left it,
the build fails with `LockError` naming the package, the version and the relock command.

Errors: `ImageError`, and its `LockError` (a lock file is missing or malformed, or a locked version is gone).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEBIAN_LOCK = Path("image/debian.lock")
PYTHON_LOCK = Path("image/python.lock")
RELOCK = "ome-routing dev image --relock"

_DEBIAN_HEADER = (
    "# The controller image's Debian packages (name version architecture), installed at\n"
    "# exactly these versions. Written by `ome-routing dev image --relock`; do not edit.\n"
)
_PYTHON_HEADER = (
    "# The controller image's Python wheels, installed with `pip --require-hashes`\n"
    "# (CPython 3.11, Linux x86_64). Written by `ome-routing dev image --relock`; do not edit.\n"
)
_NOT_FOUND = re.compile(r"Version '([^']+)' for '([^']+)' was not found")


class ImageError(RuntimeError):
    """The image could not be built."""


class LockError(ImageError):
    """A lock file cannot be read, or the archive no longer has a version it locks."""


@dataclass(frozen=True, order=True)
class DebianPackage:
    name: str
    version: str
    architecture: str

    def __str__(self) -> str:
        return f"{self.name} {self.version} {self.architecture}"


@dataclass(frozen=True, order=True)
class Wheel:
    name: str
    version: str
    sha256: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


def read_debian_lock(repo: Path) -> list[DebianPackage]:
    packages = []
    for number, line in _lines(repo / DEBIAN_LOCK):
        fields = line.split()
        if len(fields) != 3:
            raise LockError(f"{DEBIAN_LOCK}:{number}: expected 'name version architecture'")
        packages.append(DebianPackage(*fields))
    if not packages:
        raise LockError(f"{DEBIAN_LOCK} locks no package; run `{RELOCK}`")
    return packages


def read_python_lock(repo: Path) -> list[Wheel]:
    wheels = []
    for number, line in _lines(repo / PYTHON_LOCK):
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+) --hash=sha256:([0-9a-f]{64})", line)
        if match is None:
            raise LockError(f"{PYTHON_LOCK}:{number}: expected 'name==version --hash=sha256:HEX'")
        wheels.append(Wheel(*match.groups()))
    if not wheels:
        raise LockError(f"{PYTHON_LOCK} locks no wheel; run `{RELOCK}`")
    return wheels


def write_debian_lock(repo: Path, packages: list[DebianPackage]) -> None:
    body = "".join(f"{package}\n" for package in sorted(set(packages)))
    _write(repo / DEBIAN_LOCK, _DEBIAN_HEADER + body)


def write_python_lock(repo: Path, wheels: list[Wheel]) -> None:
    _write(repo / PYTHON_LOCK, _PYTHON_HEADER + "".join(f"{w}\n" for w in sorted(set(wheels))))


def missing_version(apt_output: str) -> tuple[str, str] | None:
    """(package, version) when apt's output says a requested version is not in the archive."""
    match = _NOT_FOUND.search(apt_output)
    return (match.group(2), match.group(1)) if match else None


def gone_error(package: str, version: str) -> LockError:
    return LockError(
        f"the Debian package {package} {version} of {DEBIAN_LOCK} is no longer in the archive "
        f"(it serves only the current versions, so a security update replaced it): run "
        f"`{RELOCK}` to lock the current versions, commit the lock files, then build again"
    )


def parse_dpkg_status(text: str) -> list[DebianPackage]:
    """The packages that dpkg's status file says are installed."""
    installed = []
    for paragraph in text.split("\n\n"):
        fields = dict(
            line.split(":", 1) for line in paragraph.splitlines() if line and line[0] not in " \t"
        )
        if fields.get("Status", "").strip() == "install ok installed":
            installed.append(
                DebianPackage(
                    fields["Package"].strip(),
                    fields["Version"].strip(),
                    fields["Architecture"].strip(),
                )
            )
    return sorted(installed)


def wheel_of(path: Path) -> Wheel:
    """A downloaded wheel's name (normalised as PyPI does), version and SHA-256."""
    name, version = path.name.split("-")[:2]
    return Wheel(
        re.sub(r"[-_.]+", "-", name).lower(), version, hashlib.sha256(path.read_bytes()).hexdigest()
    )


def runtime_requirements(repo: Path) -> list[str]:
    """The project's own dependencies (pyproject.toml's `dependencies`), not the dev extras."""
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _lines(path: Path) -> list[tuple[int, str]]:
    if not path.is_file():
        raise LockError(f"{path} is missing; run `{RELOCK}` to write it")
    return [
        (number, line.strip())
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)
