"""The checks of the docs convention, over parsed documents; each returns `file:line: problem`s.

- `marker_problems`: every shell block has exactly one valid `doc-test` marker on the line
  right before it, and every marker stands right before a shell block;
- `link_problems`: relative links name files of the repository, and `#anchor`s headings
  of the Markdown file they point at; http(s) links are checked for form only;
- `command_problems`: every `ome-routing ...` / `kubectl ome ...` in inline code or a shell
  block names commands and flags the CLI has (`doc_commands`);
- `metric_problems`: every `ome_[a-z_]+` metric name is one the project exports
  (`exported_metrics`), or that name plus `_total`, `_bucket`, `_sum` or `_count`;
- `run_block`: a block's script run by bash with `set -euo pipefail`, within a deadline.

`docs_of(root)` reads README.md and docs/**/*.md, whichever exist.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from doc_commands import CommandTree, invocations, logical_lines
from markdown_blocks import MARKER_KINDS, Document, Fence, parse

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_DEADLINE = 120.0
METRIC_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count")
# a metric name, not a piece of a path or a dotted module name (`src/ome_routing/metrics.py`)
_METRIC = re.compile(r"(?<![\w./-])ome_[a-z_]+(?![\w/-]|\.\w)")
# the product's and the development kit's package names
_PACKAGES = frozenset({"ome_routing", "ome_routing_dev"})
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_MARKERS_HELP = "<!-- doc-test: KIND -->, KIND one of: " + ", ".join(MARKER_KINDS)


@dataclass(frozen=True)
class Doc:
    path: Path
    label: str  # the path from the repository's root, as failures name it
    document: Document


def doc_paths(root: Path) -> list[Path]:
    """README.md and every docs/**/*.md under `root`, those that exist."""
    paths = [root / "README.md"] if (root / "README.md").is_file() else []
    if (root / "docs").is_dir():
        paths.extend(sorted(p for p in (root / "docs").rglob("*.md") if p.is_file()))
    return paths


def read_doc(path: Path, root: Path) -> Doc:
    label = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    return Doc(path, label, parse(path.read_text(encoding="utf-8")))


def docs_of(root: Path) -> list[Doc]:
    return [read_doc(path, root) for path in doc_paths(root)]


def marker_kind(fence: Fence) -> str | None:
    """The kind of the marker right before the block, when it is a valid one."""
    return fence.marker.kind if fence.marker is not None and fence.marker.valid else None


def blocks_marked(kind: str) -> list[tuple[Doc, Fence]]:
    """The shell blocks of the README and docs/ whose marker is `kind`, in order."""
    return [
        (doc, fence)
        for doc in docs_of(REPO_ROOT)
        for fence in doc.document.fences
        if fence.is_shell and marker_kind(fence) == kind
    ]


def check_block(doc: Doc, fence: Fence, env: Mapping[str, str]) -> None:
    """Run one block from the repository's root; a failure names file:line and its output."""
    run = run_block(block_script(fence), cwd=REPO_ROOT, env=env)
    if run.returncode != 0:
        pytest.fail(describe_failure(doc.label, fence, run), pytrace=False)


def marker_problems(doc: Doc) -> list[str]:
    found = []
    fence_lines = {fence.line: fence for fence in doc.document.fences}
    marker_lines = {marker.line for marker in doc.document.markers}
    for fence in doc.document.fences:
        if not fence.is_shell:
            continue
        where = f"{doc.label}:{fence.line}: ```{fence.language} block"
        if fence.marker is None:
            found.append(f"{where} has no doc-test marker on the line before it ({_MARKERS_HELP})")
        elif fence.line - 2 in marker_lines:
            found.append(f"{where} has more than one doc-test marker before it")
    for marker in doc.document.markers:
        where = f"{doc.label}:{marker.line}:"
        if not marker.valid:
            found.append(f"{where} {marker.text} is not a doc-test marker ({_MARKERS_HELP})")
        fence = fence_lines.get(marker.line + 1)
        if fence is None and marker.line + 1 not in marker_lines:
            found.append(f"{where} {marker.text} is not on the line right before a shell block")
        elif fence is not None and not fence.is_shell:
            found.append(
                f"{where} {marker.text} is before a ```{fence.language} block, not a shell block"
            )
    return found


def link_problems(
    doc: Doc, root: Path, anchors_of: Callable[[Path], frozenset[str]] | None = None
) -> list[str]:
    anchors_of = anchors_of or _anchors_of
    found = []
    for link in doc.document.links:
        where = f"{doc.label}:{link.line}: link {link.target!r}"
        target = link.target.strip()
        if _SCHEME.match(target):
            parts = urlsplit(target)
            if parts.scheme in ("http", "https") and (not parts.netloc or re.search(r"\s", target)):
                found.append(f"{where} is not a well-formed URL")
            continue
        path_part, _, anchor = target.partition("#")
        path_part = unquote(path_part.split("?", 1)[0])
        if not path_part:
            if anchor and anchor not in doc.document.anchors:
                found.append(f"{where}: {doc.label} has no heading #{anchor}")
            continue
        base = root if path_part.startswith("/") else doc.path.parent
        resolved = Path(os.path.normpath(base / path_part.lstrip("/")))
        if not resolved.is_relative_to(root):
            found.append(f"{where} points outside the repository")
        elif not resolved.exists():
            found.append(f"{where}: no such file {resolved.relative_to(root).as_posix()}")
        elif (
            anchor
            and resolved.suffix == ".md"
            and resolved.is_file()
            and anchor not in anchors_of(resolved)
        ):
            where_to = resolved.relative_to(root).as_posix()
            found.append(f"{where}: {where_to} has no heading #{anchor}")
    return found


@cache
def _anchors_of(path: Path) -> frozenset[str]:
    return parse(path.read_text(encoding="utf-8")).anchors


def shell_lines(fence: Fence) -> list[tuple[int, str]]:
    return list(logical_lines(fence.body, fence.body_line, console=fence.language == "console"))


def command_problems(doc: Doc, tree: CommandTree) -> list[str]:
    pieces: list[tuple[int, str]] = []
    for span in doc.document.spans:
        pieces.extend(logical_lines(span.text, span.line))
    for fence in doc.document.fences:
        if fence.is_shell:
            pieces.extend(shell_lines(fence))
    found = []
    for line, code in pieces:
        for invocation in invocations(code, line):
            found.extend(f"{doc.label}:{line}: {problem}" for problem in tree.problems(invocation))
    return found


def metric_names(lines: Iterable[str]) -> list[tuple[int, str]]:
    """(line, name) of each metric name the text mentions."""
    found = []
    for number, line in enumerate(lines, start=1):
        for match in _METRIC.finditer(line):
            name = match.group()
            if name not in _PACKAGES and not name.endswith("_"):  # a prefix is not a name
                found.append((number, name))
    return found


def metric_problems(doc: Doc, exported: frozenset[str]) -> list[str]:
    return [
        f"{doc.label}:{line}: {name} is not a metric the project exports"
        for line, name in metric_names(doc.document.lines)
        if name not in exported
    ]


def exported_metrics() -> frozenset[str]:
    """The controller's and the reporter's metric names, each with the allowed suffixes."""
    from ome_routing.metrics import RoutingMetrics
    from ome_routing.reporter.reportmetrics import ReporterMetrics

    registries = [
        RoutingMetrics().registry,
        ReporterMetrics(lambda: {}, lambda: datetime.now(UTC)).registry,
    ]
    names = {family.name for registry in registries for family in registry.collect()}
    return frozenset(name + suffix for name in names for suffix in METRIC_SUFFIXES)


def block_environment(base: Mapping[str, str], *, kubeconfig: Path | None = None) -> dict[str, str]:
    """A block's environment: the virtualenv's bin first on PATH; KUBECONFIG only when
    given, so that a `run` block reaches no cluster."""
    env = {key: value for key, value in base.items() if key != "KUBECONFIG"}
    # the interpreter running the tests: the checkout's .venv under make
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return env


def block_script(fence: Fence) -> str:
    """What bash runs for a block: the body, or a console block's prompted lines alone."""
    if fence.language != "console":
        return fence.body
    return "".join(f"{code}\n" for _, code in shell_lines(fence))


@dataclass(frozen=True)
class BlockRun:
    returncode: int | None  # None when the deadline ended it
    output: str


def run_block(
    script: str, *, cwd: Path, env: Mapping[str, str], deadline: float = RUN_DEADLINE
) -> BlockRun:
    """Run `script` with `bash -euo pipefail` in a process group of its own.

    The block's result is bash's exit code, or None when the deadline ended it. Whatever of
    its group still runs when bash is done (a server it left in the background) is ended
    too; the output goes to a file, so such a process cannot hold the run open.
    """
    with tempfile.TemporaryDirectory(prefix="doc-block-") as scratch:
        script_path = Path(scratch) / "block.sh"
        script_path.write_text(script, encoding="utf-8")
        with open(Path(scratch) / "output", "w+", encoding="utf-8") as output:
            process = subprocess.Popen(
                ["bash", "-euo", "pipefail", str(script_path)],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                returncode: int | None = process.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:
                _end_group(process.pid)
                process.wait()
            output.seek(0)
            return BlockRun(returncode, output.read())


def _end_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def describe_failure(
    label: str, fence: Fence, run: BlockRun, deadline: float = RUN_DEADLINE
) -> str:
    how = (
        f"did not finish within {deadline:g} s"
        if run.returncode is None
        else f"exited {run.returncode}"
    )
    tail = "\n".join(run.output.splitlines()[-40:])
    return f"{label}:{fence.line}: ```{fence.language} block {how}; its output:\n{tail}"
