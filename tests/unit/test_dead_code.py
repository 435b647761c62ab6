"""`make check`'s dead-code check: vulture with the project's configuration and allowlist
finds a function that nothing calls, and each allowlist entry is needed."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWLIST = ROOT / "tools" / "vulture_allowlist.py"

UNUSED = '''

def nothing_calls_this(value: int) -> int:
    """Added by the test: no caller anywhere."""
    return value + 1
'''


def vulture(root: Path) -> subprocess.CompletedProcess[str]:
    """`vulture` as `make check` runs it: its settings from `root`'s pyproject.toml."""
    return subprocess.run(
        [sys.executable, "-m", "vulture"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """What the check reads (the packages, bench/, .ci/, the allowlist, pyproject.toml),
    where the test may change it."""
    for package in ("src/ome_routing", "devkit/src/ome_routing_dev"):
        shutil.copytree(ROOT / package, tmp_path / package)
    for tree in ("bench", ".ci"):
        shutil.copytree(ROOT / tree, tmp_path / tree, ignore=shutil.ignore_patterns("logs"))
    (tmp_path / "tools").mkdir()
    shutil.copy(ALLOWLIST, tmp_path / "tools")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_package_has_no_dead_code(copy: Path) -> None:
    result = vulture(copy)
    assert (result.returncode, result.stdout) == (0, "")


def test_a_function_that_nothing_calls_fails_the_check(copy: Path) -> None:
    weights = copy / "src" / "ome_routing" / "core" / "weights.py"
    line = len(weights.read_text().splitlines()) + 3
    weights.write_text(weights.read_text() + UNUSED)
    result = vulture(copy)
    assert result.returncode == 3
    assert result.stdout == (
        f"src/ome_routing/core/weights.py:{line}: "
        "unused function 'nothing_calls_this' (60% confidence)\n"
    )


def test_what_the_allowlist_keeps_alive_is_dead_without_it(copy: Path) -> None:
    """The click `convert` protocol method is alive only through its allowlist entry."""
    allowlist = copy / "tools" / "vulture_allowlist.py"
    allowlist.write_text(allowlist.read_text().replace("\n_.convert  #", "\n#"))
    result = vulture(copy)
    assert result.returncode == 3
    assert result.stdout == (
        "src/ome_routing/cli/params.py:18: unused method 'convert' (60% confidence)\n"
    )


def allowlisted_names() -> list[str]:
    names: list[str] = []
    for node in ast.parse(ALLOWLIST.read_text()).body:
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            value = node.value
            names.append(value.attr if isinstance(value, ast.Attribute) else ast.unparse(value))
    return names


def test_every_allowlist_entry_is_needed(copy: Path) -> None:
    """Without the allowlist vulture reports every name on it: none is stale, none is
    kept alive by a use vulture sees anyway."""
    (copy / "tools" / "vulture_allowlist.py").write_text("")
    result = vulture(copy)
    reported = {line.split("'")[1] for line in result.stdout.splitlines()}
    assert [name for name in allowlisted_names() if name not in reported] == []
