"""The two layers of the controller's image: what goes in them, and the steps that make them.

`devcluster.image.build_image` runs these steps and caches their results;
this module is the recipe (its bytes are part of the image's cache key):

- the base layer (`base_rootfs`): `mmdebstrap --variant=custom` of Debian bookworm with
  exactly the packages and versions of `image/debian.lock` (the essential set, Python 3.11
  and ca-certificates), no docs, man pages or locales, the user `ome-routing`, no shells,
  every file dated `BASE_EPOCH`;
- the Python layer: the wheels of `image/python.lock` fetched on the host and checked
  against their hashes (`fetch_wheels`), then installed in the chroot from local files only
  with `--require-hashes`, with the compiled poll path beside its source, checked to import
  there, and compiled to hash-based `.pyc`; then the bill of materials of both layers
  (`install_wheels`, `image_sbom`).

`relock` writes both lock files from the current archive and PyPI (`ome-routing dev image
--relock`): resolving is the only step that sees whatever the archive serves today.

Errors: `ImageError` (a step failed; its message names the step and quotes its output).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ome_routing import __version__
from ome_routing_dev.devcluster.compiled import extension_files, module_names
from ome_routing_dev.devcluster.image_locks import (
    DEBIAN_LOCK,
    PYTHON_LOCK,
    DebianPackage,
    ImageError,
    Wheel,
    gone_error,
    missing_version,
    parse_dpkg_status,
    read_debian_lock,
    read_python_lock,
    runtime_requirements,
    wheel_of,
    write_debian_lock,
    write_python_lock,
)
from ome_routing_dev.devcluster.image_sbom import SBOM_PATH, bill_of_materials
from ome_routing_dev.devcluster.tools import Progress

NAME = "ome-routing"
UID = GID = 65532
BASE_EPOCH = 1747699200  # 2025-05-20, the Debian snapshot these machines install from
DEBIAN_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
#: What `relock` resolves (with Debian's essential set); the build installs the lock.
PACKAGES = ("python3.11", "ca-certificates")
#: The pip that runs the install in the chroot from its own wheel (locked, with its hash).
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
_PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]


def key_of(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update((part.encode() if isinstance(part, str) else part) + b"\0")
    return digest.hexdigest()[:16]


def base_key(repo: Path) -> str:
    """The Debian layer's inputs: the recipe and the locked packages (a relock rebuilds it)."""
    lock = [str(package) for package in read_debian_lock(repo)]
    return key_of(*DEBIAN_SOURCES, *lock, *_EXCLUDED, *_BASE_HOOKS, str(BASE_EPOCH))


def wheels_key(repo: Path) -> str:
    return key_of(*map(str, read_python_lock(repo)), sys.version[:4])


def base_rootfs(repo: Path, root: Path, say: Progress) -> Path:
    tarball = root / f"base-{base_key(repo)}.tar"
    if tarball.is_file():
        return tarball
    say("building the Debian root filesystem with mmdebstrap (once per lock, ~1-2 min)")
    started = time.monotonic()
    partial = tarball.with_name(f".{tarball.name}.partial")
    locked = [f"{p.name}={p.version}" for p in read_debian_lock(repo)]
    command = [
        "mmdebstrap",
        # custom: exactly the packages given, each at its locked version, installed as the
        # essential variant installs its own (dpkg in the chroot)
        "--variant=custom",
        "--mode=root",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        f"--include={','.join(locked)}",
        *(f"--dpkgopt=path-exclude={pattern}" for pattern in _EXCLUDED),
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        *(f"--customize-hook={hook}" for hook in _BASE_HOOKS),
        "--format=tar",
        "bookworm",
        str(partial),
        *DEBIAN_SOURCES,
    ]
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(BASE_EPOCH)}
    try:
        run(command, "mmdebstrap", env=env)
    except ImageError as error:
        partial.unlink(missing_ok=True)
        if gone := missing_version(str(error)):
            raise gone_error(*gone) from None
        raise
    partial.rename(tarball)
    for stale in root.glob("base-*.tar"):
        if stale != tarball:
            stale.unlink()
    say(f"Debian root filesystem ready in {time.monotonic() - started:.0f}s")
    return tarball


def relock(repo: Path, say: Progress) -> tuple[list[str], list[str]]:
    """Write `image/debian.lock` and `image/python.lock` from what the Debian archive and PyPI
    serve now; the lines each lost and gained (`- old`, `+ new`)."""
    _require_python_311("the wheels are resolved")
    before = _lock_lines(repo)
    write_debian_lock(repo, _resolve_debian(say))
    write_python_lock(repo, _resolve_python(repo, say))
    after = _lock_lines(repo)
    return sorted(before - after), sorted(after - before)


def _lock_lines(repo: Path) -> set[str]:
    lines: set[str] = set()
    for path in (DEBIAN_LOCK, PYTHON_LOCK):
        if (repo / path).is_file():
            text = (repo / path).read_text().splitlines()
            lines |= {f"{path.name}: {line}" for line in text if line and line[0] != "#"}
    return lines


def _resolve_debian(say: Progress) -> list[DebianPackage]:
    """Debian's essential set and `PACKAGES`, at the versions the archive serves now."""
    say("resolving the image's Debian packages with mmdebstrap (~1-2 min)")
    with tempfile.TemporaryDirectory(prefix="ome-relock-") as scratch:
        status = Path(scratch) / "status"
        run(
            [
                "mmdebstrap", "--variant=essential", "--mode=root",
                "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
                f"--include={','.join(PACKAGES)}",
                *(f"--dpkgopt=path-exclude={pattern}" for pattern in _EXCLUDED),
                f'--customize-hook=cp "$1/var/lib/dpkg/status" {status}',
                "--format=null", "bookworm", "-", *DEBIAN_SOURCES,
            ],
            "mmdebstrap (resolving the Debian packages)",
        )  # fmt: skip
        return parse_dpkg_status(status.read_text())


def _resolve_python(repo: Path, say: Progress) -> list[Wheel]:
    """The project's dependencies at constraints.txt's versions, and pip, as PyPI's wheels."""
    say("resolving the image's wheels from PyPI at constraints.txt's versions")
    with tempfile.TemporaryDirectory(prefix="ome-relock-") as scratch:
        run(
            [
                *_PIP, "download", "--only-binary=:all:", "--no-cache-dir",
                "-c", "constraints.txt", "-d", scratch,
                *runtime_requirements(repo), f"pip=={PIP_VERSION}",
            ],
            "pip download",
            cwd=repo,
            env=_pip_env(),
        )  # fmt: skip
        return sorted(wheel_of(path) for path in Path(scratch).glob("*.whl"))


def _require_python_311(what: str) -> None:
    if sys.version_info[:2] != (3, 11):
        # The wheels are chosen for the running Python: they must fit the image's.
        raise ImageError(
            f"{what} with the Python that runs this build, which must be 3.11 like the "
            f"image's (Debian bookworm); this is {sys.version.split()[0]}"
        )


def _pip_env() -> dict[str, str]:
    """pip's environment without a local wheel directory, which could stand in for PyPI's."""
    return {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_NO_INDEX")}


def fetch_wheels(repo: Path, root: Path, say: Progress) -> Path:
    target = root / f"wheels-{wheels_key(repo)}"
    if (target / ".complete").is_file():
        return target
    _require_python_311("the image's wheels are fetched")
    say(f"fetching the wheels of {PYTHON_LOCK} from PyPI, checking their hashes (once per lock)")
    shutil.rmtree(target, ignore_errors=True)
    run(
        [
            *_PIP, "download", "--require-hashes", "--no-deps", "--only-binary=:all:",
            "--no-cache-dir", "-d", str(target), "-r", str(repo / PYTHON_LOCK),
        ],
        "pip download --require-hashes",
        cwd=repo,
        env=_pip_env(),
    )  # fmt: skip
    (target / ".complete").write_text("")
    for stale in root.glob("wheels-*"):
        if stale != target:
            shutil.rmtree(stale, ignore_errors=True)
    return target


def product_source(repo: Path, into: Path) -> Path:
    """The product's sources of the checkout `repo` (pyproject.toml, README.md, src/, no
    caches) copied under `into`: what its wheel holds, and nothing a build left there."""
    source = into / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(repo / name, source / name)
    shutil.copytree(
        repo / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    return source


def install_wheels(repo: Path, rootfs: Path, wheels: Path, compiled: Path, epoch: int) -> None:
    """pip from its own wheel, in the chroot, from local files only; the compiled poll path
    beside its source; then hash-based .pyc."""
    inbox = rootfs / "tmp" / "wheels"
    shutil.copytree(wheels, inbox)
    env = {PATH_ENV.split("=")[0]: PATH_ENV.split("=")[1], "SOURCE_DATE_EPOCH": str(epoch)}
    env |= dict(variable.split("=", 1) for variable in PYTHON_ENV)
    pip = f"/tmp/wheels/pip-{PIP_VERSION}-py3-none-any.whl/pip"
    with tempfile.TemporaryDirectory(prefix="ome-routing-wheel-") as scratch:
        # from a copy of what the wheel is built from (the image's source key): setuptools
        # builds in the source's build/, which a checkout keeps, with modules long gone
        source = product_source(repo, Path(scratch))
        run(
            [*_PIP, "wheel", "--no-deps", "-w", str(inbox), "."],
            "pip wheel (the project)",
            cwd=source,
            env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)},
        )
    # The lock without pip (it runs the install, the image has none), and the project's
    # wheel just built, with its hash: pip's hash-checking mode takes all or none.
    (own,) = inbox.glob(f"{NAME.replace('-', '_')}-{__version__}-*.whl")
    requirements = [w for w in read_python_lock(repo) if w.name != "pip"]
    requirements.append(Wheel(NAME, __version__, wheel_of(own).sha256))
    (inbox / "requirements.txt").write_text("".join(f"{w}\n" for w in requirements))
    chroot = ["chroot", str(rootfs), "/usr/bin/python3.11"]
    run(
        [
            *chroot, pip, "install", "--quiet", "--require-hashes", "--no-index",
            "--find-links=/tmp/wheels", "--only-binary=:all:", "--no-compile", "--no-cache-dir",
            "--break-system-packages", "--root-user-action=ignore",
            "--disable-pip-version-check", "-r", "/tmp/wheels/requirements.txt",
        ],
        "pip install --require-hashes (in the chroot)",
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
    sbom = rootfs / SBOM_PATH.lstrip("/")
    sbom.parent.mkdir(parents=True, exist_ok=True)
    sbom.write_bytes(bill_of_materials(rootfs, epoch))
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
