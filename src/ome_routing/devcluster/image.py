"""The controller's container image: Debian's packages and the project's wheels, in OCI layout.

    image = build_image(repo=Path("."), progress=print)   # a cache hit when nothing changed
    image.layout, image.reference, image.digest, image.archive

Three stages, each cached under `<cache>/image/` in a file named for its inputs:

1. **base**: `mmdebstrap --variant=essential` of Debian bookworm with Python 3.11 and
   ca-certificates, no docs, man pages or locales, the user `ome-routing` (65532:65532),
   and without the shells (the entrypoint is a Python script). Its files carry one fixed
   date, so the layer is the same for every commit and is rebuilt only when its recipe
   changes.
2. **wheels**: the dependencies of `constraints.txt` as wheels, fetched on the host (pip in
   the chroot cannot verify PyPI), and pip's own wheel, which runs from the file.
3. **image**: the base as one layer; the project's wheel, installed in the chroot with
   `--no-index`, with the poll path's extension modules compiled by mypyc on the host beside
   its source (`devcluster.compiled`; the image's Python is 3.11 too, and the build checks
   that each imports there: a host whose C library is newer than bookworm's could make
   ones that do not), compiled to hash-based `.pyc`, as a second; `umoci config` sets the
   user,
   entrypoint, environment and OCI labels. Every date is the commit's date
   (`SOURCE_DATE_EPOCH`), so one commit gives one digest. `skopeo` also writes a
   `docker-archive` tarball for `docker load`, `kind load image-archive` or `ctr import`.

It needs root (mmdebstrap's root mode, chroot, files owned by other users) and installs
mmdebstrap, umoci and skopeo with apt-get when they are missing. It never uses mmdebstrap's
`chrootless` mode, which would run package scripts against the host.

Errors: `ImageError` (a step failed; its message names the step and quotes its output).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ome_routing import __version__
from ome_routing.devcluster.compiled import (
    CompileError,
    build_compiled,
    compiled_key,
    extension_files,
    module_names,
)
from ome_routing.devcluster.tools import Progress, cache_dir

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
DEBIAN_TOOLS = ("mmdebstrap", "umoci", "skopeo")

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
_SITE = "/usr/local/lib/python3.11/dist-packages"


class ImageError(RuntimeError):
    """The image could not be built."""


@dataclass(frozen=True)
class Image:
    """A built image: its OCI layout and tag, the manifest digest, the docker-archive."""

    layout: Path
    tag: str
    digest: str
    archive: Path
    revision: str

    @property
    def reference(self) -> str:
        """`oci:<layout>:<tag>`, as skopeo and umoci name it."""
        return f"oci:{self.layout}:{self.tag}"


def image_dir(cache: Path | None = None) -> Path:
    """Where the image and its inputs are cached: `<cache>/image`."""
    return (cache or cache_dir()) / "image"


def build_image(
    repo: Path, progress: Progress | None = None, cache: Path | None = None, force: bool = False
) -> Image:
    """Build the image of the checkout `repo`, or return the cached one of the same inputs."""
    say = progress or (lambda _message: None)
    repo = repo.resolve()
    if not (repo / "pyproject.toml").is_file() or not (repo / "constraints.txt").is_file():
        raise ImageError(f"{repo} is not a checkout of {NAME} (no pyproject.toml, constraints.txt)")
    root = image_dir(cache)
    root.mkdir(parents=True, exist_ok=True)
    revision, epoch = _revision(repo)
    recipe = Path(__file__).read_bytes()  # this module: a change to it is a new build
    key = _digest(
        _base_key(),
        _wheels_key(repo),
        _source_key(repo),
        compiled_key(repo),
        revision,
        str(epoch),
        recipe,
    )
    layout, archive = root / "oci", root / f"{NAME}-{__version__}.docker.tar"
    with locked(root / ".lock", say):
        found = _cached(layout, archive, key)
        if found and not force:
            return Image(layout, __version__, found, archive, revision)
        _require_root()
        _ensure_debian_tools(say)
        started = time.monotonic()
        base = _base_rootfs(root, say)
        wheels = _wheels(repo, root, say)
        try:
            compiled = build_compiled(repo, say, cache)
        except CompileError as error:
            raise ImageError(f"compiling the poll path: {error}") from None
        with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as scratch:
            work = Path(scratch)
            _assemble(repo, work, base, wheels, compiled, revision, epoch, say)
            (work / "oci" / ".key").write_text(key + "\n")
            shutil.rmtree(layout, ignore_errors=True)
            archive.unlink(missing_ok=True)
            (work / "archive.tar").rename(archive)
            (work / "oci").rename(layout)
        digest = _manifest_digest(layout, __version__)
        say(f"image {NAME}:{__version__} {digest} built in {time.monotonic() - started:.0f}s")
        return Image(layout, __version__, digest, archive, revision)


@contextlib.contextmanager
def locked(path: Path, say: Progress) -> Iterator[None]:
    """One build at a time per cache; a second one waits, then finds the first's image."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another build of the image in {path.parent}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _cached(layout: Path, archive: Path, key: str) -> str | None:
    stamp = layout / ".key"
    if not archive.is_file() or not stamp.is_file() or stamp.read_text().strip() != key:
        return None
    return _manifest_digest(layout, __version__)


def _manifest_digest(layout: Path, tag: str) -> str:
    index = json.loads((layout / "index.json").read_text())
    for manifest in index.get("manifests", []):
        if manifest.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return str(manifest["digest"])
    raise ImageError(f"{layout} has no image tagged {tag}")


def _require_root() -> None:
    if os.geteuid() != 0:
        raise ImageError(
            "building the image needs root (mmdebstrap --mode=root, chroot, files owned by "
            f"UID {UID}); run it as root"
        )


def _ensure_debian_tools(say: Progress) -> None:
    missing = [tool for tool in DEBIAN_TOOLS if shutil.which(tool) is None]
    if not missing:
        return
    say(f"installing {' '.join(missing)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-q"], "apt-get update", env=env)
    _run(["apt-get", "install", "-y", "-q", *missing], "apt-get install", env=env)


def _revision(repo: Path) -> tuple[str, int]:
    """The commit (with `-dirty` for local changes) and its date, the image's date."""
    try:
        head = _run(["git", "rev-parse", "HEAD"], "git rev-parse", cwd=repo).strip()
        epoch = int(_run(["git", "log", "-1", "--format=%ct"], "git log", cwd=repo).strip())
        status = _run(
            ["git", "status", "--porcelain", "--", "src", "pyproject.toml"], "git", cwd=repo
        )
    except ImageError:
        return "unknown", BASE_EPOCH
    return (f"{head}-dirty" if status.strip() else head), epoch


def _digest(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update((part.encode() if isinstance(part, str) else part) + b"\0")
    return digest.hexdigest()[:16]


def _base_key() -> str:
    return _digest(*DEBIAN_SOURCES, *PACKAGES, *_EXCLUDED, *_BASE_HOOKS, str(BASE_EPOCH))


def _wheels_key(repo: Path) -> str:
    return _digest((repo / "constraints.txt").read_bytes(), PIP_VERSION, sys.version[:4])


def _source_key(repo: Path) -> str:
    files = sorted(
        path
        for path in (repo / "src").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path)
    )
    parts = [f"{p.relative_to(repo)}\0".encode() + p.read_bytes() for p in files]
    return _digest(
        (repo / "pyproject.toml").read_bytes(), (repo / "README.md").read_bytes(), *parts
    )


def _base_rootfs(root: Path, say: Progress) -> Path:
    tarball = root / f"base-{_base_key()}.tar"
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
    _run(command, "mmdebstrap", env=env)
    partial.rename(tarball)
    for stale in root.glob("base-*.tar"):
        if stale != tarball:
            stale.unlink()
    say(f"Debian root filesystem ready in {time.monotonic() - started:.0f}s")
    return tarball


def _wheels(repo: Path, root: Path, say: Progress) -> Path:
    target = root / f"wheels-{_wheels_key(repo)}"
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
    _run([*pip, "wheel", "-c", "constraints.txt", "-w", str(target), "."], "pip wheel", cwd=repo)
    for own in target.glob("ome_routing-*.whl"):
        own.unlink()
    _run(
        [*pip, "download", "--no-deps", "-d", str(target), f"pip=={PIP_VERSION}"],
        "pip download pip",
        cwd=repo,
    )
    (target / ".complete").write_text("")
    for stale in root.glob("wheels-*"):
        if stale != target:
            shutil.rmtree(stale, ignore_errors=True)
    return target


def _assemble(
    repo: Path,
    work: Path,
    base: Path,
    wheels: Path,
    compiled: Path,
    revision: str,
    epoch: int,
    say: Progress,
) -> None:
    layout, bundle = work / "oci", work / "bundle"
    image = f"{layout}:{__version__}"
    rootfs = bundle / "rootfs"
    base_date, date = _rfc3339(BASE_EPOCH), _rfc3339(epoch)
    _run(["umoci", "init", "--layout", str(layout)], "umoci init")
    _run(["umoci", "new", "--image", image], "umoci new")
    _run(["umoci", "unpack", "--image", image, str(bundle)], "umoci unpack")
    _run(["tar", "-xpf", str(base), "--numeric-owner", "-C", str(rootfs)], "tar")
    say("layer 1: the Debian root filesystem")
    _repack(
        image, bundle, base_date, f"mmdebstrap --variant=essential bookworm {' '.join(PACKAGES)}"
    )
    say("layer 2: the project's wheel and its dependencies")
    _install_wheels(repo, rootfs, wheels, compiled, epoch)
    _repack(
        image,
        bundle,
        date,
        f"pip install {NAME}=={__version__} (-c constraints.txt); the poll path compiled (mypyc)",
    )
    labels = {
        "org.opencontainers.image.title": NAME,
        "org.opencontainers.image.description": "Multi-cluster routing controller for OME",
        "org.opencontainers.image.version": __version__,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.source": _source_url(repo),
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.created": date,
    }
    _run(
        [
            "umoci", "config", "--image", image,
            f"--config.user={UID}:{GID}",
            f"--config.entrypoint={NAME}",
            "--config.cmd=controller",
            "--config.workingdir=/",
            f"--config.env={PATH_ENV}",
            *(f"--config.env={variable}" for variable in PYTHON_ENV),
            *(f"--config.label={k}={v}" for k, v in labels.items() if v),
            f"--created={date}",
            f"--history.created={date}",
            f"--history.created_by=umoci config (user {UID}, entrypoint {NAME})",
        ],
        "umoci config",
    )  # fmt: skip
    _run(["umoci", "gc", "--layout", str(layout)], "umoci gc")
    shutil.rmtree(bundle)
    say("writing the docker-archive tarball with skopeo")
    _run(
        [
            "skopeo", "copy", "--quiet", f"oci:{image}",
            f"docker-archive:{work / 'archive.tar'}:{NAME}:{__version__}",
        ],
        "skopeo copy",
    )  # fmt: skip


def _repack(image: str, bundle: Path, date: str, created_by: str) -> None:
    _run(
        [
            "umoci", "repack", "--image", image, "--refresh-bundle",
            f"--history.created={date}", f"--history.created_by={created_by}", str(bundle),
        ],
        "umoci repack",
    )  # fmt: skip


def _install_wheels(repo: Path, rootfs: Path, wheels: Path, compiled: Path, epoch: int) -> None:
    """pip from its own wheel, in the chroot, from local files only; the compiled poll path
    beside its source; then hash-based .pyc."""
    inbox = rootfs / "tmp" / "wheels"
    shutil.copytree(wheels, inbox)
    shutil.copy(repo / "constraints.txt", inbox / "constraints.txt")
    env = {PATH_ENV.split("=")[0]: PATH_ENV.split("=")[1], "SOURCE_DATE_EPOCH": str(epoch)}
    env |= dict(variable.split("=", 1) for variable in PYTHON_ENV)
    pip = f"/tmp/wheels/pip-{PIP_VERSION}-py3-none-any.whl/pip"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(inbox), "."],
        "pip wheel (the project)",
        cwd=repo,
        env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)},
    )
    chroot = ["chroot", str(rootfs), "/usr/bin/python3.11"]
    _run(
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
    _install_compiled(rootfs / _SITE.lstrip("/"), compiled)
    _check_compiled(chroot, env)
    _run(
        [*chroot, "-m", "compileall", "-q", "--invalidation-mode=unchecked-hash", _SITE],
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
    _run([*chroot, "-c", script], "importing the compiled poll path (in the chroot)", env=env)


def _clamp_dates(rootfs: Path, epoch: int) -> None:
    """Give every file changed during the build the commit's date, as mmdebstrap does."""
    for directory, names, files in os.walk(rootfs):
        for name in [*names, *files, "."]:
            path = os.path.join(directory, name)
            if os.lstat(path).st_mtime > epoch:
                os.utime(path, (epoch, epoch), follow_symlinks=False)


def _source_url(repo: Path) -> str:
    """The clone's `origin` if it is a public URL; else no source label."""
    try:
        url = _run(["git", "remote", "get-url", "origin"], "git remote", cwd=repo).strip()
    except ImageError:
        return ""
    return url if url.startswith("https://") and "@" not in url else ""


def _rfc3339(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(
    command: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> str:
    # The program is found on the host's PATH, whatever PATH `env` gives the chroot.
    command = [shutil.which(command[0]) or command[0], *command[1:]]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()[-4000:]
        raise ImageError(f"{what} failed ({result.returncode}): {' '.join(command)}\n{output}")
    return result.stdout
