""".ci/lanes.py (`make test`): the counts it sums, the skips it fails on, the line it ends on.

Each test runs the real pytest on a small suite of its own and reads what it wrote, as the
lanes read each suite's log and junit report.
"""

from __future__ import annotations

import importlib.util
import re
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


def _run_lanes(
    lanes: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    plan: dict[str, list[object]],
) -> list[tuple[str, str]]:
    """Run `plan`'s lanes as `main` does (threads over real processes) and return the order
    of ("start"/"end", step) events, read from the marks the steps write."""
    monkeypatch.setattr(lanes, "LOGS", tmp_path / "logs")
    monkeypatch.setattr(lanes, "REPO", tmp_path)
    lanes.LOGS.mkdir()
    lanes._BY_NAME.clear()
    lanes._LANES.clear()
    for steps in plan.values():
        for step in steps:
            lanes._BY_NAME[step.name] = step
    lanes._LANES.update(plan)
    walls: dict[str, float] = {}
    threads = [
        lanes.threading.Thread(target=lanes.run_lane, args=(name, steps, {}, walls))
        for name, steps in plan.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    marks = (tmp_path / "marks").read_text().split()
    return [(mark.split(":")[0], mark.split(":")[1]) for mark in marks]


def _step(lanes: ModuleType, tmp_path: Path, name: str, seconds: float, **kw: object) -> object:
    """A step that marks its start and end in tmp_path/marks and sleeps between them."""
    code = (
        "import sys, time; f = open(sys.argv[1], 'a'); f.write('start:%s\\n' % sys.argv[2]); "
        "f.flush(); time.sleep(float(sys.argv[3])); f.write('end:%s\\n' % sys.argv[2])"
    )
    argv = [sys.executable, "-c", code, str(tmp_path / "marks"), name, str(seconds)]
    return lanes.Step(name, argv, **kw)


def test_an_alone_step_runs_after_every_suite_when_nothing_is_built(
    lanes: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = {
        "tools": [_step(lanes, tmp_path, "plane", 0.1, build=True)],
        "a": [_step(lanes, tmp_path, "unit", 0.5), _step(lanes, tmp_path, "docs", 0.5)],
        "b": [_step(lanes, tmp_path, "e2e", 1.0, needs=("plane",))],
        "c": [_step(lanes, tmp_path, "chaos", 0.2, needs=("plane",), alone=True)],
    }
    events = _run_lanes(lanes, tmp_path, monkeypatch, plan)
    assert events.index(("start", "chaos")) > max(
        events.index(("end", name)) for name in ("unit", "docs", "e2e")
    )
    assert all(step.status == "passed" for steps in plan.values() for step in steps)


def test_an_alone_step_runs_beside_builds_and_holds_the_suites_that_wait_for_them(
    lanes: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cold: the gateways take long to build; once the other suites are done, the alone
    # step runs beside the build, and the suite that needed the build starts after it
    plan = {
        "tools": [
            _step(lanes, tmp_path, "plane", 0.1, build=True),
            _step(lanes, tmp_path, "gateways", 2.0, build=True),
        ],
        "a": [_step(lanes, tmp_path, "unit", 0.3)],
        "b": [
            _step(lanes, tmp_path, "e2e", 0.3, needs=("plane",)),
            _step(lanes, tmp_path, "gateway", 0.2, needs=("gateways",)),
        ],
        "c": [_step(lanes, tmp_path, "chaos", 3.0, needs=("plane",), alone=True)],
    }
    events = _run_lanes(lanes, tmp_path, monkeypatch, plan)
    start, end = events.index(("start", "chaos")), events.index(("end", "chaos"))
    assert start > events.index(("end", "unit")) and start > events.index(("end", "e2e"))
    assert start < events.index(("end", "gateways")) < end  # beside the build
    assert events.index(("start", "gateway")) > end  # held until it ended


def test_a_steps_environment_reaches_its_process_and_no_other(
    lanes: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = (
        "import os, sys; f = open(sys.argv[1], 'a'); "
        "f.write('start:%s\\nend:%s\\n' % (sys.argv[2], os.environ.get('SHARDED', 'unset')))"
    )
    marks = str(tmp_path / "marks")
    plan = {
        "a": [
            lanes.Step("sharded", [sys.executable, "-c", code, marks, "sharded"],
                       env={"SHARDED": "2"}),
            lanes.Step("plain", [sys.executable, "-c", code, marks, "plain"]),
        ]
    }  # fmt: skip
    events = _run_lanes(lanes, tmp_path, monkeypatch, plan)
    assert events == [("start", "sharded"), ("end", "2"), ("start", "plain"), ("end", "unset")]


def test_the_e2e_sharded_steps_run_the_listed_files_with_two_replicas(lanes: ModuleType) -> None:
    steps = [s for s in lanes.plan()["chaos"] if s.name.startswith("e2e-sharded-")]
    assert [s.name for s in steps] == ["e2e-sharded-1", "e2e-sharded-2"]
    assert all(step.env == {"OME_ROUTING_E2E_SHARDED": "2"} for step in steps)
    files = [a for step in steps for a in step.argv if a.startswith("tests/")]
    assert sorted(files) == sorted(lanes.E2E_SHARDED)
    assert len(files) == len(set(files)) == 18
    assert all((lanes.REPO / path).is_file() for path in lanes.E2E_SHARDED)


def test_the_chaos_suite_runs_whole_and_only_two_files_alone(lanes: ModuleType) -> None:
    chaos = {s.name: s for s in lanes.plan()["chaos"]}
    quiet = [a for a in chaos["chaos-quiet"].argv if a.startswith("tests/")]
    rest = [a for a in chaos["chaos"].argv if a.startswith("tests/")]
    assert quiet == [
        "tests/chaos/test_control_plane.py",
        "tests/chaos/test_hostile_reporters.py",
        "tests/shards/test_shards_kill.py",
    ]
    assert chaos["chaos-quiet"].alone and not chaos["chaos"].alone
    shards = next(s for s in lanes.plan()["kube"] if s.name == "shards")
    rest += [a for a in shards.argv if a.startswith("tests/")]
    every = sorted(
        f"tests/{suite}/{p.name}"
        for suite in ("chaos", "shards")
        for p in (lanes.REPO / "tests" / suite).glob("test_*.py")
    )
    assert sorted(quiet + rest) == every
    assert not set(quiet) & set(rest)


def test_every_sharded_skip_of_the_e2e_sharded_files_is_allowlisted(lanes: ModuleType) -> None:
    """Each `@unsharded_only(reason)` test of those files skips with a reason the allowlist
    expects in the e2e-sharded step that runs its file, and only there."""
    marked = re.compile(r'@unsharded_only\(\s*"([^"]+)"\s*\)\s*\n(?:@.*\n)*async def (\w+)')
    found = []
    for n, half in enumerate(lanes.E2E_SHARDED_HALVES, start=1):
        for path in half:
            for why, name in marked.findall((lanes.REPO / path).read_text()):
                test_id = f"{path}::{name}"
                reason = f"not in sharded mode (OME_ROUTING_E2E_SHARDED): {why}"
                assert lanes.expected(f"e2e-sharded-{n}", test_id, reason), test_id
                assert not lanes.expected("e2e-2", test_id, reason), test_id
                found.append(test_id)
    assert found, "no test is skipped in sharded mode"


def test_the_bench_steps_run_every_bench_once_and_only_the_gateways_one_waits_for_them(
    lanes: ModuleType,
) -> None:
    """The two bench steps' `-k` split tests/bench, as pytest collects it, in two: the
    benches that run the gateways (`Bench.gateways`) in the one that needs their build."""
    from tests.bench.test_benches_smoke import BENCHES, bench_id

    steps = {s.name: s for s in lanes.plan()["pure"] if s.name.startswith("bench")}
    assert sorted(steps) == ["bench", "bench-gateway"]
    collected = {}
    for name, step in steps.items():
        args = step.argv[step.argv.index("tests/bench") :]  # one -q: a line per test
        result = subprocess.run(
            [sys.executable, "-m", "pytest", *args, "--collect-only"],
            cwd=lanes.REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        collected[name] = {
            line.split("[", 1)[1].rstrip("]")
            for line in result.stdout.splitlines()
            if line.startswith("tests/bench/") and "[" in line
        }
    every = {bench_id(b) for b in BENCHES}
    gateways = {bench_id(b) for b in BENCHES if b.gateways}
    assert gateways and collected["bench-gateway"] == gateways
    assert collected["bench"] == every - gateways
    assert "tools-gateways" in steps["bench-gateway"].needs
    assert steps["bench-gateway"].exclusive == "gateway"
    assert "tools-gateways" not in steps["bench"].needs and steps["bench"].exclusive is None
