"""The two layers of the controller's image: what goes in them, and the steps that make them.

`devcluster.image.build_image` runs these steps and caches their results;
this module is the recipe (its bytes are part of the image's cache key):

- the base layer (`base_rootfs`): `mmdebstrap --variant=essential` of Debian bookworm with
  Python 3.11 and ca-certificates, no docs, man pages or locales, the user `ome-routing`,
  no shells, every file dated `BASE_EPOCH`;
- the Python layer: the dependencies' wheels fetched on the host (`fetch_wheels`), then
  installed in the chroot from local files only, with the compiled poll path beside its
  source, checked to import there, and compiled to hash-based `.pyc` (`install_wheels`).

Errors: `ImageError` (a step failed; its message names the step and quotes its output).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ome_routing import __version__
from ome_routing.devcluster.compiled import extension_files, module_names
from ome_routing.devcluster.tools import Progress

NAME = "ome-routing"
UID = GID = 65532
BASE_EPOCH = 1747699200  # 2025-05-20, the Debian snapshot these machines install from
DEBIAN_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
PACKAGES = ("python3.11", "ca-certificates")
PIP_VERSION = "26.3"
PYTHON_ENV = ("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "LANG=C.UTF-8")
PATH_ENV = "PATH=/usr/local/bin:/usr/bin"

_EXCLUDED = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
# Run by mmdebstrap on the host with the root filesystem as $1, after the packages are in.
_BASE_HOOKS = (
    f'echo "{NAME}:x:{GID}:" >> "$1/etc/group"',
    f'echo "{NAME}:x:{UID}:{GID}:{NAME}:/nonexistent:/usr/sbin/nologin" >> "$1/etc/passwd"',
    f'echo "{NAME}:!:{BASE_EPOCH // 86400}::::::" >> "$1/etc/shadow"',
    # Copied from the build host; a container runtime provides its own.
    'rm -f "$1/etc/hostname" "$1/etc/resolv.conf"',
    'rm -f "$1"/usr/bin/bash "$1"/usr/bin/rbash "$1"/usr/bin/dash "$1"/usr/bin/sh',
    'rm -rf "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old "$1"/var/log/*',
)
SITE = "/usr/local/lib/python3.11/dist-packages"


class ImageError(RuntimeError):
    """The image could not be built."""


def key_of(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update((part.encode() if isinstance(part, str) else part) + b"\0")
    return digest.hexdigest()[:16]


def base_key() -> str:
    return key_of(*DEBIAN_SOURCES, *PACKAGES, *_EXCLUDED, *_BASE_HOOKS, str(BASE_EPOCH))


def wheels_key(repo: Path) -> str:
    return key_of((repo / "constraints.txt").read_bytes(), PIP_VERSION, sys.version[:4])


def base_rootfs(root: Path, say: Progress) -> Path:
    tarball = root / f"base-{base_key()}.tar"
    if tarball.is_file():
        return tarball
    say("building the Debian root filesystem with mmdebstrap (once per recipe, ~1-2 min)")
    started = time.monotonic()
    partial = tarball.with_name(f".{tarball.name}.partial")
    command = [
        "mmdebstrap",
        "--variant=essential",
        "--mode=root",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        f"--include={','.join(PACKAGES)}",
        *(f"--dpkgopt=path-exclude={pattern}" for pattern in _EXCLUDED),
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        *(f"--customize-hook={hook}" for hook in _BASE_HOOKS),
        "--format=tar",
        "bookworm",
        str(partial),
        *DEBIAN_SOURCES,
    ]
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(BASE_EPOCH)}
    run(command, "mmdebstrap", env=env)
    partial.rename(tarball)
    for stale in root.glob("base-*.tar"):
        if stale != tarball:
            stale.unlink()
    say(f"Debian root filesystem ready in {time.monotonic() - started:.0f}s")
    return tarball


def fetch_wheels(repo: Path, root: Path, say: Progress) -> Path:
    target = root / f"wheels-{wheels_key(repo)}"
    if (target / ".complete").is_file():
        return target
    if sys.version_info[:2] != (3, 11):
        # The wheels are resolved for the running Python: they must fit the image's.
        raise ImageError(
            f"the image's wheels are fetched with the Python that runs this build, which must "
            f"be 3.11 like the image's (Debian bookworm); this is {sys.version.split()[0]}"
        )
    say("fetching the dependencies' wheels from PyPI (once per constraints.txt)")
    shutil.rmtree(target, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    run([*pip, "wheel", "-c", "constraints.txt", "-w", str(target), "."], "pip wheel", cwd=repo)
    for own in target.glob("ome_routing-*.whl"):
        own.unlink()
    run(
        [*pip, "download", "--no-deps", "-d", str(target), f"pip=={PIP_VERSION}"],
        "pip download pip",
        cwd=repo,
    )
    (target / ".complete").write_text("")
    for stale in root.glob("wheels-*"):
        if stale != target:
            shutil.rmtree(stale, ignore_errors=True)
    return target


def install_wheels(repo: Path, rootfs: Path, wheels: Path, compiled: Path, epoch: int) -> None:
    """pip from its own wheel, in the chroot, from local files only; the compiled poll path
    beside its source; then hash-based .pyc."""
    inbox = rootfs / "tmp" / "wheels"
    shutil.copytree(wheels, inbox)
    shutil.copy(repo / "constraints.txt", inbox / "constraints.txt")
    env = {PATH_ENV.split("=")[0]: PATH_ENV.split("=")[1], "SOURCE_DATE_EPOCH": str(epoch)}
    env |= dict(variable.split("=", 1) for variable in PYTHON_ENV)
    pip = f"/tmp/wheels/pip-{PIP_VERSION}-py3-none-any.whl/pip"
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(inbox), "."],
        "pip wheel (the project)",
        cwd=repo,
        env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)},
    )
    chroot = ["chroot", str(rootfs), "/usr/bin/python3.11"]
    run(
        [
            *chroot, pip, "install", "--quiet", "--no-index", "--find-links=/tmp/wheels",
            "--only-binary=:all:", "--no-compile", "--no-cache-dir", "--break-system-packages",
            "--root-user-action=ignore", "--disable-pip-version-check",
            "-c", "/tmp/wheels/constraints.txt", f"{NAME}=={__version__}",
        ],
        "pip install (in the chroot)",
        env=env,
    )  # fmt: skip
    shutil.rmtree(inbox)
    _install_compiled(rootfs / SITE.lstrip("/"), compiled)
    _check_compiled(chroot, env)
    run(
        [*chroot, "-m", "compileall", "-q", "--invalidation-mode=unchecked-hash", SITE],
        "compileall (in the chroot)",
        env=env,
    )
    _clamp_dates(rootfs, epoch)


def _install_compiled(site: Path, compiled: Path) -> None:
    """The extension modules of the compiled tree, each beside the source it was built from.

    Python imports an extension module before the source of the same name.
    """
    for relative in extension_files(compiled):
        target = site / relative
        if not target.parent.is_dir():
            raise ImageError(
                f"the compiled {relative} has no package in the image ({target.parent})"
            )
        shutil.copyfile(compiled / relative, target)
        target.chmod(0o644)


def _check_compiled(chroot: list[str], env: dict[str, str]) -> None:
    """Every module of the poll path imports its extension module on the image's Python."""
    script = (
        "import importlib\n"
        f"for name in {module_names()!r}:\n"
        "    loaded = importlib.import_module(name).__file__ or ''\n"
        "    if not loaded.endswith('.so'):\n"
        "        raise SystemExit(f'{name} imports {loaded}, not its extension module')\n"
    )
    run([*chroot, "-c", script], "importing the compiled poll path (in the chroot)", env=env)


def _clamp_dates(rootfs: Path, epoch: int) -> None:
    """Give every file changed during the build the commit's date, as mmdebstrap does."""
    for directory, names, files in os.walk(rootfs):
        for name in [*names, *files, "."]:
            path = os.path.join(directory, name)
            if os.lstat(path).st_mtime > epoch:
                os.utime(path, (epoch, epoch), follow_symlinks=False)


def run(
    command: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> str:
    # The program is found on the host's PATH, whatever PATH `env` gives the chroot.
    command = [shutil.which(command[0]) or command[0], *command[1:]]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-4000:]
        raise ImageError(f"{what} failed ({result.returncode}): {' '.join(command)}\n{output}")
    return result.stdout
