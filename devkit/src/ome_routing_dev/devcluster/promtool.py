"""promtool, Prometheus' rule checker and rule unit tester, built once.

The chart's alert rules are tested as Prometheus users test theirs: `promtool check rules`
and `promtool test rules` (tests/chart/test_alert_rules_promtool.py). promtool is built from
the Go module proxy by the helper module `tools/promtool/` (`tools/promtool/build.sh`), at the
version its go.mod/go.sum pin (`github.com/prometheus/prometheus` v0.316.0, which is
Prometheus 3.16.0). It lands under the cache directory (see `tools.cache_dir`) in
`promtool-<version>-<key>`, the key a digest of the module's go.mod, go.sum and build.sh, with
a stamp written last, as the other built tools do. It never uses a promtool found on PATH.

Errors: `ToolsError` (the build failed; its message quotes the build's last lines).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ome_routing_dev.devcluster.gateway_tools import build_key, pinned_version
from ome_routing_dev.devcluster.tools import (
    Progress,
    _require,
    build_staged,
    cache_dir,
    ensure_binary,
    tools_module_dir,
)

PROMETHEUS_MODULE = "github.com/prometheus/prometheus"


def promtool_module_dir() -> Path:
    """The repository's `tools/promtool/` folder (the Go helper module that builds promtool)."""
    return tools_module_dir() / "promtool"


def prometheus_release(module_version: str) -> str:
    """The Prometheus release of a module version: v0.316.0 is 3.16.0, v0.54.1 is 2.54.1
    (Prometheus 3 counts its minor from 300); another form is returned as it is."""
    match = re.fullmatch(r"v0\.(\d+)\.(\d+)", module_version)
    if match is None:
        return module_version
    minor, patch = int(match[1]), match[2]
    return f"{minor // 100}.{minor % 100}.{patch}" if minor >= 300 else f"2.{minor}.{patch}"


def promtool_target(root: Path, module_dir: Path) -> Path:
    """The cache folder of the promtool that `module_dir` builds: a change to its go.mod,
    go.sum or build.sh is a new folder, so a new build."""
    version = pinned_version(PROMETHEUS_MODULE, module_dir)
    return root / f"promtool-{version}-{build_key(module_dir)}"


def ensure_promtool(progress: Progress | None = None, cache: Path | None = None) -> Path:
    """The promtool binary, built once from the pinned helper module."""
    say = progress or (lambda _message: None)
    root = cache or cache_dir()
    module_dir = promtool_module_dir()
    target = promtool_target(root, module_dir)
    return ensure_binary(
        root, target, target / "promtool", lambda: _build(module_dir, target, say), say
    )


def _build(module_dir: Path, target: Path, say: Progress) -> None:
    _require("go", "to build promtool (Go 1.26.7 or newer, as Prometheus 3.16 requires)")
    version = pinned_version(PROMETHEUS_MODULE, module_dir)
    say(
        f"building promtool {prometheus_release(version)} ({PROMETHEUS_MODULE} {version}) from "
        f"the Go module proxy into {target} (once; a first build takes several minutes)"
    )
    started = time.monotonic()
    build_staged(
        module_dir, target, f"{PROMETHEUS_MODULE} {version}", say, label=lambda _: "promtool"
    )
    say(f"promtool ready in {target} ({time.monotonic() - started:.0f}s)")
