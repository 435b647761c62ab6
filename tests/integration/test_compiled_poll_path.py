"""The compiled poll path (`devcluster.compiled`): what `make test-compiled` runs on.

With `OME_ROUTING_EXPECT_COMPILED=1` (set by `make test-compiled`) every module of
`HOT_MODULES` must have been imported from its extension module, so that a tree missing
from `PYTHONPATH` cannot pass for the compiled build; otherwise from its source.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from ome_routing_dev.devcluster.compiled import HOT_MODULES, compiled_key, module_names

EXPECT_COMPILED = os.environ.get("OME_ROUTING_EXPECT_COMPILED") == "1"


@pytest.mark.parametrize(("module", "name"), list(zip(HOT_MODULES, module_names(), strict=True)))
def test_the_poll_path_runs_from_the_build_under_test(module: str, name: str) -> None:
    loaded = importlib.import_module(name).__file__
    assert loaded is not None
    if EXPECT_COMPILED:
        assert loaded.endswith(".so"), f"{name} was imported from {loaded}, not compiled"
    else:
        assert loaded.endswith(module), f"{name} was imported from {loaded}"


def _a_checkout(root: Path) -> Path:
    for module in HOT_MODULES:
        path = root / "src" / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {module}\n")
    (root / "src" / "ome_routing" / "cli.py").write_text("# not compiled\n")
    return root


def test_the_compiled_tree_is_built_anew_for_any_change_of_the_source(tmp_path: Path) -> None:
    repo = _a_checkout(tmp_path)
    first = compiled_key(repo)
    assert compiled_key(repo) == first
    # a module that is not compiled still gives the compiled ones their types
    (repo / "src" / "ome_routing" / "cli.py").write_text("# changed\n")
    second = compiled_key(repo)
    assert second != first
    (repo / "src" / HOT_MODULES[0]).write_text("# changed\n")
    third = compiled_key(repo)
    assert third not in (first, second)
    # files other than Python source do not count
    (repo / "src" / "ome_routing" / "notes.txt").write_text("notes\n")
    assert compiled_key(repo) == third
