"""The controller's container image: Debian's packages and the project's wheels, in OCI layout.

    image = build_image(repo=Path("."), progress=print)   # a cache hit when nothing changed
    image.layout, image.reference, image.digest, image.archive

Three stages, each cached under `<cache>/image/` in a file named for its inputs:

1. **base**: `mmdebstrap --variant=custom` of Debian bookworm with exactly the packages and
   versions of the committed `image/debian.lock` (the essential set, Python 3.11 and
   ca-certificates), no docs, man pages or locales, the user `ome-routing` (65532:65532),
   and without the shells (the entrypoint is a Python script). Its files carry one fixed
   date, so the layer is the same for every commit and every builder, and is rebuilt only
   when its recipe or the lock changes (`ome-routing dev image --relock`).
2. **wheels**: the wheels of the committed `image/python.lock` (the project's dependencies
   and pip's own wheel, which runs from the file), fetched on the host (pip in the chroot
   cannot verify PyPI) and checked against the lock's hashes.
3. **image**: the base as one layer; the project's wheel and the locked ones, installed in
   the chroot with `--no-index --require-hashes`, with the poll path's extension modules
   compiled by mypyc on the host beside
   its source (`devcluster.compiled`; the image's Python is 3.11 too, and the build checks
   that each imports there: a host whose C library is newer than bookworm's could make
   ones that do not), compiled to hash-based `.pyc`, and a CycloneDX bill of materials of
   both layers (`devcluster.image_sbom`), as a second; `umoci config` sets the
   user,
   entrypoint, environment and OCI labels. Every date is the commit's date
   (`SOURCE_DATE_EPOCH`), so one commit gives one digest. `skopeo` also writes a
   `docker-archive` tarball for `docker load`, `kind load image-archive` or `ctr import`.

It needs root (mmdebstrap's root mode, chroot, files owned by other users) and installs
mmdebstrap, umoci and skopeo with apt-get when they are missing. It never uses mmdebstrap's
`chrootless` mode, which would run package scripts against the host.

The layers' recipe (stages 1 and 2, and what stage 3 installs) is `devcluster.image_layers`,
the lock files' format `devcluster.image_locks`; this module runs the stages, caches them,
and makes the OCI image of their output.

Errors: `ImageError` (a step failed; its message names the step and quotes its output).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ome_routing import __version__
from ome_routing_dev.devcluster import image_layers, image_locks, image_sbom
from ome_routing_dev.devcluster.compiled import CompileError, build_compiled, compiled_key
from ome_routing_dev.devcluster.image_layers import (
    BASE_EPOCH,
    GID,
    NAME,
    PATH_ENV,
    PYTHON_ENV,
    UID,
    base_key,
    base_rootfs,
    fetch_wheels,
    install_wheels,
    key_of,
    run,
    wheels_key,
)
from ome_routing_dev.devcluster.image_locks import DEBIAN_LOCK, PYTHON_LOCK, ImageError
from ome_routing_dev.devcluster.tools import Progress, cache_dir

__all__ = [
    "GID",
    "NAME",
    "UID",
    "Image",
    "ImageError",
    "build_image",
    "image_dir",
    "locked",
    "relock",
]

DEBIAN_TOOLS = ("mmdebstrap", "umoci", "skopeo")


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
    # this module and the layers' recipe: a change to any is a new build
    recipe = (
        b"".join(
            Path(module.__file__ or "").read_bytes()
            for module in (image_layers, image_locks, image_sbom)
        )
        + Path(__file__).read_bytes()
    )
    key = key_of(
        base_key(repo),
        wheels_key(repo),
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
        base = base_rootfs(repo, root, say)
        wheels = fetch_wheels(repo, root, say)
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


def relock(repo: Path, progress: Progress | None = None) -> tuple[list[str], list[str]]:
    """Write the image's lock files in the checkout `repo` from the current Debian archive and
    PyPI; the lock lines removed and added."""
    say = progress or (lambda _message: None)
    _require_root()
    _ensure_debian_tools(say)
    return image_layers.relock(repo.resolve(), say)


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
    run(["apt-get", "update", "-q"], "apt-get update", env=env)
    run(["apt-get", "install", "-y", "-q", *missing], "apt-get install", env=env)


def _revision(repo: Path) -> tuple[str, int]:
    """The commit (with `-dirty` for local changes) and its date, the image's date."""
    try:
        head = run(["git", "rev-parse", "HEAD"], "git rev-parse", cwd=repo).strip()
        epoch = int(run(["git", "log", "-1", "--format=%ct"], "git log", cwd=repo).strip())
        status = run(
            ["git", "status", "--porcelain", "--", "src", "pyproject.toml", "image"],
            "git",
            cwd=repo,
        )
    except ImageError:
        return "unknown", BASE_EPOCH
    return (f"{head}-dirty" if status.strip() else head), epoch


def _source_key(repo: Path) -> str:
    files = sorted(
        path
        for path in (repo / "src").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path)
    )
    parts = [f"{p.relative_to(repo)}\0".encode() + p.read_bytes() for p in files]
    return key_of((repo / "pyproject.toml").read_bytes(), (repo / "README.md").read_bytes(), *parts)


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
    run(["umoci", "init", "--layout", str(layout)], "umoci init")
    run(["umoci", "new", "--image", image], "umoci new")
    run(["umoci", "unpack", "--image", image, str(bundle)], "umoci unpack")
    run(["tar", "-xpf", str(base), "--numeric-owner", "-C", str(rootfs)], "tar")
    say("layer 1: the Debian root filesystem")
    _repack(image, bundle, base_date, f"mmdebstrap --variant=custom bookworm ({DEBIAN_LOCK})")
    say("layer 2: the project's wheel and its dependencies")
    install_wheels(repo, rootfs, wheels, compiled, epoch)
    _repack(
        image,
        bundle,
        date,
        f"pip install {NAME}=={__version__} (--require-hashes, {PYTHON_LOCK}); the poll path "
        "compiled (mypyc); the bill of materials",
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
    run(
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
    run(["umoci", "gc", "--layout", str(layout)], "umoci gc")
    shutil.rmtree(bundle)
    say("writing the docker-archive tarball with skopeo")
    run(
        [
            "skopeo", "copy", "--quiet", f"oci:{image}",
            f"docker-archive:{work / 'archive.tar'}:{NAME}:{__version__}",
        ],
        "skopeo copy",
    )  # fmt: skip


def _repack(image: str, bundle: Path, date: str, created_by: str) -> None:
    run(
        [
            "umoci", "repack", "--image", image, "--refresh-bundle",
            f"--history.created={date}", f"--history.created_by={created_by}", str(bundle),
        ],
        "umoci repack",
    )  # fmt: skip


def _source_url(repo: Path) -> str:
    """The clone's `origin` if it is a public URL; else no source label."""
    try:
        url = run(["git", "remote", "get-url", "origin"], "git remote", cwd=repo).strip()
    except ImageError:
        return ""
    return url if url.startswith("https://") and "@" not in url else ""


def _rfc3339(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
