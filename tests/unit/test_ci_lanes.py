""".ci/lanes.py (`make test`): the counts it sums, the skips it fails on, the line it ends on.

Each test runs the real pytest on a small suite of its own and reads what it wrote, as the
lanes read each suite's log and junit report.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

LANES_FILE = Path(__file__).resolve().parents[2] / ".ci" / "lanes.py"

SUITE = """
import pytest

def test_passes():
    pass

def test_fails():
    assert False

@pytest.mark.skip(reason="needs the compiled poll path")
def test_skipped():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("set-up")

def test_errors(broken):
    pass
"""


@pytest.fixture(scope="module")
def lanes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_lanes", LANES_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_lanes"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def ran(tmp_path: Path, lanes: ModuleType, monkeypatch: pytest.MonkeyPatch) -> object:
    """A step named `compiled` whose log and junit report are a real pytest run's."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_mixed.py").write_text(SUITE)
    step = lanes.Step("compiled", [], pytest=True)
    monkeypatch.setattr(lanes, "LOGS", tmp_path / "logs")
    lanes.LOGS.mkdir()
    with step.log.open("w") as log:
        subprocess.run(
            [sys.executable, "-m", "pytest", "suite", "-q", "-p", "no:cacheprovider",
             f"--junitxml={step.junit}", "-o", "junit_family=xunit1"],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, check=False,
        )  # fmt: skip
    return step


def test_counts_are_those_of_pytests_summary_line(lanes: ModuleType, ran: object) -> None:
    assert lanes.pytest_counts(ran.log) == {"passed": 1, "failed": 1, "skipped": 1, "error": 1}  # type: ignore[attr-defined]


def test_the_summary_line_counts_errors_as_failed(lanes: ModuleType) -> None:
    total = {"passed": 3, "failed": 1, "error": 2, "skipped": 4}
    assert lanes.summary_line(total) == "3 passed, 3 failed, 4 skipped"
    assert lanes.summary_line({"passed": 5}) == "5 passed, 0 failed"


def test_a_skip_is_expected_only_as_listed(
    lanes: ModuleType, ran: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    skips = [(i, r) for i, _, r in lanes.junit_cases(ran) if r is not None]
    assert skips == [("suite/test_mixed.py::test_skipped", "needs the compiled poll path")]
    test_id, reason = skips[0]
    listed = (("compiled", r"test_mixed\.py::", r"compiled poll path"),)
    monkeypatch.setattr(lanes, "EXPECTED_SKIPS", listed)
    assert lanes.expected("compiled", test_id, reason)
    assert not lanes.expected("integration", test_id, reason)  # another step
    assert not lanes.expected("compiled", test_id, "needs openssl")  # another reason
    monkeypatch.setattr(lanes, "EXPECTED_SKIPS", ())
    assert not lanes.expected("compiled", test_id, reason)


def test_the_allowlist_names_the_dispatch_ring_tests_of_the_compiled_run(
    lanes: ModuleType,
) -> None:
    reason = "subclasses Dispatcher, which the compiled poll path (mypyc) does not allow"
    test_id = "tests/integration/test_dispatch_ring.py::test_a_ring"
    assert lanes.expected("compiled", test_id, reason)
    assert not lanes.expected("integration", test_id, reason)
