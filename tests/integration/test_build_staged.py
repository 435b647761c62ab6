"""Building a cached tool: a real `build.sh` run, staged, then renamed only when it ends well."""

from __future__ import annotations

from pathlib import Path

import pytest

from ome_routing_dev.devcluster.tools import ToolsError, build_staged

SCRIPT = """\
set -e
out="$1"
mkdir -p "$out/bin"
echo "==> building demo (4 packages; go build -v)"
echo "go: downloading example.com/x v1.0.0"
for p in a b c d; do echo "example.com/$p"; done
echo built > "$out/bin/demo"
"""


def write_script(folder: Path, body: str) -> Path:
    folder.mkdir()
    (folder / "build.sh").write_text(body)
    return folder


def test_a_build_that_ends_well_is_renamed_into_place_with_its_stamp(tmp_path: Path) -> None:
    module = write_script(tmp_path / "module", SCRIPT)
    target = tmp_path / "cache" / "demo-v1"
    target.parent.mkdir()
    said: list[str] = []
    build_staged(module, target, "example.com/demo v1", said.append, label=lambda _s: "demo")
    assert (target / "bin" / "demo").read_text() == "built\n"
    assert (target / ".complete").read_text() == "example.com/demo v1\n"
    assert not (tmp_path / "cache" / ".demo-v1.partial").exists()
    # the `go: ` line is not a package; four packages make 25% steps, said once a tenth
    assert said == [
        "building demo (4 packages; go build -v)",
        "  demo: 1 packages compiled (25%)",
        "  demo: 2 packages compiled (50%)",
        "  demo: 3 packages compiled (75%)",
        "  demo: 4 packages compiled (100%)",
    ]


def test_a_failed_build_leaves_nothing_that_looks_complete(tmp_path: Path) -> None:
    module = write_script(
        tmp_path / "module",
        'mkdir -p "$1"\necho "==> building demo (2 packages)"\necho boom; exit 3\n',
    )
    target = tmp_path / "cache" / "demo-v1"
    target.parent.mkdir()
    target.mkdir()  # an earlier, incomplete attempt
    with pytest.raises(ToolsError) as raised:
        build_staged(module, target, "stamp", lambda _m: None, label=lambda s: s)
    assert "build.sh" in str(raised.value)
    assert str(raised.value).endswith("==> building demo (2 packages)\nboom")
    assert not target.exists()
    assert not (tmp_path / "cache" / ".demo-v1.partial").exists()
