"""The poll path compiled with mypyc: the same source, as C extension modules.

    tree = build_compiled(repo=Path("."), progress=print)   # a cache hit when nothing changed
    PYTHONPATH=<tree> python ...                             # imports the compiled modules

The modules every capacity poll runs through (`HOT_MODULES`: the observer's transport,
flight, pool, schedule, budget, time limits and recording, and the core's window, its
allocation and the report) are compiled by mypyc from their unchanged source, with the
mypy that `constraints.txt` pins. The controller image ships them beside the source; a checkout and a
`pip install` run the source itself, which behaves the same and costs more CPU per poll
(`bench/poll_throughput`). `make test` runs the unit and integration suites on both.

The tree is a copy of `src/` with the extension modules built in place, cached under
`<cache>/compiled/<key>/src`, where the key covers every source file, the Python version and
mypy's version: a change to any of them is a new build, so a compiled module never stands
for source it was not built from. It needs a C compiler and the Python headers.

Errors: `CompileError` (mypyc failed; the message quotes its output).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from ome_routing_dev.devcluster.tools import Progress, _locked, cache_dir

#: The modules compiled, relative to `src/`: what a capacity poll runs through.
HOT_MODULES = (
    "ome_routing/core/allocation.py",
    "ome_routing/core/capacity.py",
    "ome_routing/core/report.py",
    "ome_routing/observer/budget.py",
    "ome_routing/observer/deadlines.py",
    "ome_routing/observer/dispatch.py",
    "ome_routing/observer/flight.py",
    "ome_routing/observer/homes.py",
    "ome_routing/observer/observer.py",
    "ome_routing/observer/pool.py",
    "ome_routing/observer/rejudging.py",
    "ome_routing/observer/scheduling.py",
    "ome_routing/observer/transport.py",
)
_STAMP = ".complete"
#: compiled trees kept in the cache, the newest first
KEEP_TREES = 3


class CompileError(RuntimeError):
    """mypyc could not compile the poll path."""


def module_names() -> list[str]:
    """The dotted names of `HOT_MODULES`, as `import` takes them."""
    return [module.removesuffix(".py").replace("/", ".") for module in HOT_MODULES]


def compiled_key(repo: Path) -> str:
    """What the compiled tree is built from: every source file, Python's and mypy's versions."""
    digest = hashlib.sha256()
    for part in (sys.version.split()[0], metadata.version("mypy"), *HOT_MODULES):
        digest.update(part.encode() + b"\0")
    source = repo / "src"
    for path in sorted(source.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_compiled(repo: Path, progress: Progress | None = None, cache: Path | None = None) -> Path:
    """The compiled tree of the checkout `repo` (its `src/`), built once per `compiled_key`."""
    say = progress or (lambda _message: None)
    repo = repo.resolve()
    if not all((repo / "src" / module).is_file() for module in HOT_MODULES):
        raise CompileError(f"{repo} is not a checkout of ome-routing (no src/{HOT_MODULES[0]})")
    root = (cache or cache_dir()) / "compiled"
    root.mkdir(parents=True, exist_ok=True)
    key = compiled_key(repo)
    tree = root / key / "src"
    with _locked(root / ".lock", say):
        if (tree / _STAMP).is_file():
            return tree
        say(f"compiling the poll path with mypyc ({len(HOT_MODULES)} modules, ~30 s)")
        with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as scratch:
            work = Path(scratch) / "src"
            shutil.copytree(
                repo / "src", work, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
            _mypyc(work)
            for scratch_dir in ("build", ".mypy_cache"):  # mypyc's, not the tree's
                shutil.rmtree(work / scratch_dir, ignore_errors=True)
            (work / _STAMP).write_text(key + "\n")
            shutil.rmtree(tree.parent, ignore_errors=True)
            tree.parent.mkdir()
            work.rename(tree)
        # the trees of older sources go, but the last few stay: a process started on one
        # (a benchmark, a test run) may still import from it
        built = [d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")]
        built.sort(key=lambda d: d.stat().st_mtime, reverse=True)
        for stale in built[KEEP_TREES:]:
            if stale.name != key:
                shutil.rmtree(stale, ignore_errors=True)
        return tree


def extension_files(tree: Path) -> list[Path]:
    """The extension modules of a compiled tree, relative to it.

    One per module of `HOT_MODULES`, and mypyc's runtime support for them, at the top.
    """
    return sorted(path.relative_to(tree) for path in tree.rglob("*.so"))


def _mypyc(work: Path) -> None:
    # mypyc reads no configuration here (none in `src/`): the project's strict settings are
    # `make check`'s; compiling needs only the types
    command = [sys.executable, "-m", "mypyc", *HOT_MODULES]
    # the C compiler writes the build directory (a fresh temporary one) and mypyc's runtime
    # sources (wherever the virtualenv is) into the modules: mapped to fixed names, one
    # source gives the same bytes in any cache and from any checkout
    maps = {str(work): "."} | {str(path): "mypyc" for path in _mypyc_dirs()}
    flags = " ".join(
        [os.environ.get("CFLAGS", ""), *(f"-ffile-prefix-map={k}={v}" for k, v in maps.items())]
    )
    try:
        subprocess.run(
            command,
            cwd=work,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "CFLAGS": flags.strip()},
        )
    except subprocess.CalledProcessError as error:
        output = (error.stdout + error.stderr).strip()[-4000:]
        raise CompileError(f"mypyc failed (exit {error.returncode}):\n{output}") from None
    except FileNotFoundError as error:
        raise CompileError(f"mypyc could not run: {error}") from None
    missing = [
        module
        for module in HOT_MODULES
        if not list((work / module).parent.glob(Path(module).stem + ".*.so"))
    ]
    if missing:
        raise CompileError(f"mypyc left no extension module for {', '.join(missing)}")


def _mypyc_dirs() -> set[Path]:
    """mypyc's package directory as this Python finds it, and behind any symlink."""
    spec = importlib.util.find_spec("mypyc")
    found = {Path(p) for p in (spec.submodule_search_locations or [])} if spec else set()
    return found | {path.resolve() for path in found}
