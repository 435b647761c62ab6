"""`make test`: every check and every suite, in parallel lanes, each lane's log kept.

    .venv/bin/python .ci/lanes.py            # what `make test` and .ci/run run
    .venv/bin/python .ci/lanes.py --only pure --only chaos   # some lanes only

A lane is a thread running its steps one after another; lanes run at the same time. A step
waits for the steps it `needs` (the Go tools before any suite with a control plane), and a
step with an `exclusive` group never runs at the same moment as another step of that group
(the gateways: Traefik, Contour and Envoy pick free ports and could take each other's).
Every suite that needs a control plane starts its own (tests/plane_fixtures.py, free ports),
so suites in different lanes share nothing but the tool cache, whose builds are locked.

The lanes (see docs/developing.md, "CI times"):

- pure: `make check`, unit, integration, fuzz and the compiled run (no tools needed), then
  bench (the control plane), then bench-gateway (the one bench that runs the gateways,
  `-k gateway_split`: it waits for their build, in the gateway group).
- tools: the Go tools, niced, one set at a time in the order the suites need them (the
  cache has one lock, so two builds never run at once anyway): the control plane and the
  Gateway API's CRDs, as root the node's binaries, the gateways, promtool, then `dev
  tools` for all (a cache hit). When warm each is a cache hit.
- node: as root, the image first (cached, niced), then tests/image and tests/node: the
  longest suite, mostly waiting for pods; it runs in a network namespace of its own, so it
  shares no port with the gateways.
- kube: the first half of tests/e2e (every other file, in name order), then tests/soak
  (the control plane), then tests/shards (sharded replicas under faults, each test on a
  control plane of its own), then docs and chart (the control plane and promtool).
- gateway: the second half of tests/e2e, then tests/gateway (gateway group).
- chaos: most of tests/chaos (the control plane under faults, fencing, watches), then
  e2e-sharded in two halves: the e2e files that run the controller command, again with
  each controller two sharded replicas (`OME_ROUTING_E2E_SHARDED=2`,
  tests/e2e/controller_harness.py); then chaos-quiet alone: it starts once every other
  lane is done or waits for a build, and no other suite starts while it runs (only the
  niced builds go on beside it). Warm, that is after every other suite; cold, while the
  gateways or promtool are still being built, and the suites waiting for them start after
  it. It is the three files whose figures a loaded machine lowers: the hostile scenario
  counts how often 1,000 homes are polled, the control-plane test counts the writes at
  rest, and tests/shards' kill test bounds the time until a killed replica's maps follow.

SIGTERM or SIGINT to this process is passed on to every step running as SIGINT, so that
each pytest stops its control planes and gateways, and the summary is still printed.

Each step's output goes to .ci/logs/<step>.log (its tail is printed when it fails) and each
pytest run writes .ci/logs/<step>.xml. At the end: each lane's wall time, the slowest 20
tests of all lanes, the skips, and one line in pytest's form summing every lane. As root
any skip that is not in EXPECTED_SKIPS fails the run: as root every suite's prerequisites
are installable here, so a skip means a test silently did not run.

The exit status is 0 only when every step passed and no unexpected skip was seen.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
LOGS = REPO / ".ci" / "logs"
ROOT = os.geteuid() == 0

#: Skips that are expected as root, each with its reason: (step, test id pattern, reason
#: pattern). Anything else skipped as root fails the run.
EXPECTED_SKIPS: tuple[tuple[str, str, str], ...] = (
    # The compiled poll path (mypyc) forbids subclassing Dispatcher, which these tests do;
    # the same tests run in the `integration` step on the interpreted path.
    ("compiled", r"tests/integration/test_dispatch_ring\.py::", r"compiled poll path"),
    # Sharded e2e: a leader and a standby on one Lease is leader election, which sharding
    # replaces; the same test runs in the e2e halves.
    (
        "e2e-sharded-1",
        r"tests/e2e/test_controller\.py::test_only_the_leader_polls_and_a_standby_takes_over$",
        r"not in sharded mode \(OME_ROUTING_E2E_SHARDED\): a leader and a standby on one Lease",
    ),
)

#: The e2e files that run `ome-routing controller` (routing, publishing, both as the
#: chart's ServiceAccount): steps e2e-sharded-1 and -2 run them again with each controller as two
#: sharded replicas (tests/e2e/controller_harness.py, `OME_ROUTING_E2E_SHARDED`).
E2E_SHARDED = tuple(
    f"tests/e2e/test_{name}.py"
    for name in (
        "controller", "home_identity", "journal", "plan_routing", "probes", "publisher",
        "publisher_caches", "publisher_claims", "publisher_owner", "publisher_rbac",
        "publisher_settings", "ramp_controller", "rbac", "reaping", "reporter_kubernetes",
        "routing_changes", "shadow", "shadow_rbac",
    )
)  # fmt: skip

#: e2e-sharded's two steps (every other file): each about as long as a half of tests/e2e
E2E_SHARDED_HALVES = (E2E_SHARDED[0::2], E2E_SHARDED[1::2])
#: the one bench that runs the gateways (tests/bench: `Bench.gateways`), run apart with
#: `-k`: the others need no gateway, so cold they do not wait for the gateways' build
GATEWAY_BENCH = "gateway_split"
#: the files that run alone (`chaos-quiet`): their figures are ones load lowers (the
#: shards' kill test bounds the time until a killed replica's maps follow again)
CHAOS_QUIET = (
    "tests/chaos/test_control_plane.py",
    "tests/chaos/test_hostile_reporters.py",
    "tests/shards/test_shards_kill.py",
)


@dataclass
class Step:
    name: str
    argv: list[str]
    needs: tuple[str, ...] = ()
    exclusive: str | None = None
    pytest: bool = False
    # a build (niced): it never holds up an `alone` step
    build: bool = False
    # run with no other suite beside it (builds only), see `_enter`
    alone: bool = False
    # added to the run's environment
    env: dict[str, str] = field(default_factory=dict)
    # results
    status: str = "pending"  # pending, passed, failed, not run
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def log(self) -> Path:
        return LOGS / f"{self.name}.log"

    @property
    def junit(self) -> Path:
        return LOGS / f"{self.name}.xml"


def pytest_step(
    name: str,
    *paths: str,
    needs: tuple[str, ...] = (),
    exclusive: str | None = None,
    alone: bool = False,
    env: dict[str, str] | None = None,
    select: str | None = None,
) -> Step:
    """A pytest run of `paths` (with `select`, only the tests `-k` selects)."""
    argv = [str(BIN / "pytest"), *paths, "-q", "-p", "no:cacheprovider", "--durations=20"]
    if select is not None:
        argv += ["-k", select]
    return Step(
        name, argv, needs=needs, exclusive=exclusive, pytest=True, alone=alone, env=env or {}
    )


def build_step(name: str, argv: list[str], needs: tuple[str, ...] = ()) -> Step:
    return Step(name, argv, needs=needs, build=True)


def python_call(code: str) -> list[str]:
    return [str(BIN / "python"), "-c", code]


def dev_tools(*only: str) -> list[str]:
    """`ome-routing dev tools`, niced: a build must not slow the suites beside it."""
    argv = ["nice", "-n", "19", str(BIN / "ome-routing"), "dev", "tools"]
    return [*argv, *(arg for name in only for arg in ("--only", name))]


def plan() -> dict[str, list[Step]]:
    # The tool cache has one lock (devcluster.tools._locked): two builds never run at once,
    # so the tools lane builds them in the order they are needed: the control plane (every
    # suite with a plane), the node's binaries (tests/node, the longest suite), the
    # gateways (tests/gateway, tests/bench), promtool (tests/chart), then all of them again
    # (a cache hit: whatever `dev tools` finds besides, such as Envoy).
    # the control plane, and the Gateway API's CRDs (seconds; e2e tests install them):
    # fetched under the cache's one lock, so without this step an e2e test could wait
    # for it behind a whole gateway build (cold) and time out
    plane = ("tools-control-plane", "tools-gateway-api")
    gateways = (*plane, "tools-gateways")
    e2e = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "e2e").glob("test_*.py"))
    shards_rest = sorted(
        path
        for path in (
            str(p.relative_to(REPO)) for p in (REPO / "tests" / "shards").glob("test_*.py")
        )
        if path not in CHAOS_QUIET
    )
    chaos_rest = sorted(
        path
        for path in (str(p.relative_to(REPO)) for p in (REPO / "tests" / "chaos").glob("test_*.py"))
        if path not in CHAOS_QUIET
    )
    node_tools: list[Step] = []
    image_build: list[Step] = []
    if ROOT:
        node_tools = [
            build_step("node-tools", ["nice", "-n", "19", *python_call(
                "from ome_routing_dev.devcluster.node_tools import ensure_node_tools; "
                "ensure_node_tools(progress=print)")], needs=plane),
        ]  # fmt: skip
        image_build = [
            build_step("image-build", ["nice", "-n", "19", *python_call(
                "from pathlib import Path; from ome_routing_dev.devcluster.image import build_image; "
                f"build_image(Path({str(REPO)!r}), progress=print)")]),
        ]  # fmt: skip
    return {
        "pure": [
            Step("check", ["make", "--no-print-directory", "check"]),
            pytest_step("unit", "tests/unit"),
            pytest_step("integration", "tests/integration"),
            pytest_step("fuzz", "tests/fuzz"),
            Step("compiled", ["make", "--no-print-directory", "test-compiled"], pytest=True),
            # the benches use the control plane (not promtool), and one of them the
            # gateways: it runs apart, so that cold the others do not wait for the gateways'
            # build (tests/bench/conftest.py builds them only for it); warm, it takes the
            # gateway group before tests/gateway does
            pytest_step("bench", "tests/bench", needs=plane, select=f"not {GATEWAY_BENCH}"),
            pytest_step(
                "bench-gateway",
                "tests/bench",
                needs=gateways,
                exclusive="gateway",
                select=GATEWAY_BENCH,
            ),
        ],
        "tools": [
            build_step("tools-control-plane", dev_tools("control-plane")),
            build_step(
                "tools-gateway-api",
                [
                    "nice",
                    "-n",
                    "19",
                    *python_call(
                        "from ome_routing_dev.devcluster.gateway_tools import ensure_gateway_api_crds; "
                        "ensure_gateway_api_crds(progress=print)"
                    ),
                ],
            ),
            *node_tools,
            build_step("tools-gateways", dev_tools("traefik", "contour")),
            build_step("tools-promtool", dev_tools("promtool")),
            build_step("tools", dev_tools()),
        ],
        "node": [
            *image_build,
            pytest_step("image", "tests/image", needs=plane),
            pytest_step("node", "tests/node", needs=("node-tools",) if ROOT else plane),
        ],
        # tests/e2e in two halves, each with its own control plane: its time is mostly
        # waiting for polls and Leases, and one half alone was the longest lane
        # then the 5-minute soak, the sharded replicas' faults, then docs and chart
        # (promtool: cold, the last build)
        "kube": [
            pytest_step("e2e-1", *e2e[0::2], needs=plane),
            pytest_step("soak", "tests/soak", needs=plane),
            pytest_step("shards", *shards_rest, needs=plane),
            pytest_step(
                "docs-chart", "tests/docs", "tests/chart", needs=(*plane, "tools-promtool")
            ),
        ],
        "gateway": [
            pytest_step("e2e-2", *e2e[1::2], needs=plane),
            pytest_step("gateway", "tests/gateway", needs=("tools-gateways",), exclusive="gateway"),
        ],
        # most of tests/chaos and the sharded e2e beside the other lanes, then alone
        # (`_enter`) the two chaos files whose figures two busy cores lower: how often
        # 1,000 hostile homes are polled, and the writes at rest after the control plane
        # comes back (a run beside e2e and node failed both). Warm, chaos-quiet runs
        # last; cold, as soon as every other suite is done or waits for a build, beside
        # the builds only (niced), and the suites that wait for them start after it.
        "chaos": [
            pytest_step("chaos", *chaos_rest, needs=plane),
            *(
                pytest_step(
                    f"e2e-sharded-{n}", *half, needs=plane, env={"OME_ROUTING_E2E_SHARDED": "2"}
                )
                for n, half in enumerate(E2E_SHARDED_HALVES, start=1)
            ),
            pytest_step("chaos-quiet", *CHAOS_QUIET, needs=plane, alone=True),
        ],
    }


_GROUPS: dict[str, threading.Lock] = {}
#: guards the steps' states for `_enter`; notified whenever a step starts or ends
_GATE = threading.Condition()
_LANES: dict[str, list[Step]] = {}
_ALONE: list[Step] = []  # the `alone` step running, if any


def _lane_quiet(steps: list[Step], me: Step) -> bool:
    """Whether a lane runs no suite and will start none before one of its builds ends: it
    is done, or its current step is a build, or waits for a step that has not ended."""
    current = next((s for s in steps if not s.done.is_set()), None)
    if current is None or current is me or current.build:
        return True
    if current.status == "running":
        return False
    return any(not _BY_NAME[name].done.is_set() for name in current.needs)


def _enter(step: Step) -> None:
    """Wait for `step`'s turn. A suite waits while an `alone` step runs; an `alone` step
    waits until every other lane is quiet (`_lane_quiet`), so nothing but builds (niced)
    run beside it."""
    with _GATE:
        if step.alone:
            while _ALONE or not all(_lane_quiet(steps, step) for steps in _LANES.values()):
                _GATE.wait(timeout=5)
            _ALONE.append(step)
        elif not step.build:
            while _ALONE:
                _GATE.wait(timeout=5)
        step.status = "running"
        _GATE.notify_all()


def _leave(step: Step) -> None:
    with _GATE:
        if step in _ALONE:
            _ALONE.remove(step)
        _GATE.notify_all()


_RUNNING: set[subprocess.Popen[bytes]] = set()
_STOPPING = threading.Event()


def _interrupt(signum: int, _frame: object) -> None:
    """Pass SIGTERM or SIGINT on to every running step as SIGINT; start no other step."""
    _STOPPING.set()
    for process in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)


_PRINT = threading.Lock()
_START = time.monotonic()


def say(message: str) -> None:
    with _PRINT:
        print(f"[{time.monotonic() - _START:7.1f}s] {message}", flush=True)


_SUMMARY = re.compile(
    r"^=+ (.*\d+ (?:passed|failed|skipped|errors?|deselected|xfailed|xpassed|no tests ran).*) in [\d.]+s"
)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed|warnings?)")


def pytest_counts(log: Path) -> dict[str, int]:
    """The counts of the last summary line pytest wrote into `log`."""
    counts: dict[str, int] = {}
    for line in log.read_text(errors="replace").splitlines():
        line = line.strip()
        match = _SUMMARY.match(line)
        if match is None and re.fullmatch(r"(\d+ \w+(, )?)+ in [\d.]+s.*", line):
            match = re.match(r"(.*) in [\d.]+s", line)  # -q without the ===== frame
        if match:
            counts = {}
            for number, word in _COUNT.findall(match.group(1)):
                word = "error" if word.startswith("error") else word
                counts[word] = counts.get(word, 0) + int(number)
    return counts


def run_step(lane: str, step: Step, env: dict[str, str]) -> None:
    for name in step.needs:
        _BY_NAME[name].done.wait()
    if _STOPPING.is_set():
        step.status = "not run"
        say(f"{lane}: {step.name} not run: the run was interrupted")
        return
    blocked = [name for name in step.needs if _BY_NAME[name].status != "passed"]
    if blocked:
        step.status = "not run"
        say(f"{lane}: {step.name} not run: {', '.join(blocked)} did not pass")
        return
    group = _GROUPS.setdefault(step.exclusive, threading.Lock()) if step.exclusive else None
    if group is not None:
        if group.locked():
            say(f"{lane}: {step.name} waits for the {step.exclusive} group")
        group.acquire()
    try:
        if step.alone and not _STOPPING.is_set():
            say(f"{lane}: {step.name} waits until no other suite runs")
        _enter(step)
        say(f"{lane}: {step.name} started")
        started = time.monotonic()
        step_env = dict(env) | step.env
        if step.pytest:
            step.junit.unlink(missing_ok=True)
            extra = f"--junitxml={step.junit} -o junit_family=xunit1"
            step_env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} {extra}".strip()
        with step.log.open("w") as log:
            with _PRINT:
                if _STOPPING.is_set():
                    raise RuntimeError("the run was interrupted")
                process = subprocess.Popen(
                    step.argv, cwd=REPO, env=step_env, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
                _RUNNING.add(process)
            try:
                rc = process.wait()
            finally:
                with _PRINT:
                    _RUNNING.discard(process)
        step.seconds = time.monotonic() - started
        step.status = "passed" if rc == 0 else "failed"
        if step.pytest:
            step.counts = pytest_counts(step.log)
        counts = ", ".join(f"{n} {w}" for w, n in step.counts.items())
        say(
            f"{lane}: {step.name} {step.status} in {step.seconds:.0f}s (exit {rc}){': ' + counts if counts else ''}"
        )
        if rc != 0:
            tail = step.log.read_text(errors="replace").splitlines()[-60:]
            with _PRINT:
                print(f"----- the end of {step.log.relative_to(REPO)} -----")
                print("\n".join(tail))
                print("-----", flush=True)
    finally:
        _leave(step)
        if group is not None:
            group.release()


def run_lane(lane: str, steps: list[Step], env: dict[str, str], walls: dict[str, float]) -> None:
    started = time.monotonic()
    try:
        for step in steps:
            try:
                run_step(lane, step, env)
            except Exception as error:  # a lane must not take the run down
                step.status = "failed"
                say(f"{lane}: {step.name} could not run: {error!r}")
            finally:
                with _GATE:
                    step.done.set()
                    _GATE.notify_all()
    finally:
        walls[lane] = time.monotonic() - started


def junit_cases(step: Step) -> list[tuple[str, float, str | None]]:
    """(test id, seconds, skip reason or None) of each test case of a step's junit file."""
    if not step.junit.is_file():
        return []
    cases = []
    for case in ET.parse(step.junit).getroot().iter("testcase"):
        if case.get("name") is None:  # what an interrupted session leaves
            continue
        file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        test_id = f"{file}::{case.get('name')}"
        skipped = case.find("skipped")
        reason = None
        if skipped is not None and skipped.get("type") != "pytest.xfail":
            reason = skipped.get("message") or ""
        cases.append((test_id, float(case.get("time") or 0), reason))
    return cases


def expected(step: str, test_id: str, reason: str) -> bool:
    return any(
        step == s and re.search(t, test_id) and re.search(r, reason) for s, t, r in EXPECTED_SKIPS
    )


_BY_NAME: dict[str, Step] = {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="run only this lane (repeatable)")
    args = parser.parse_args()
    lanes = plan()
    if args.only:
        unknown = set(args.only) - set(lanes)
        if unknown:
            parser.error(
                f"--only: no lane named {', '.join(sorted(unknown))} (lanes: {', '.join(lanes)})"
            )
        wanted = set(args.only)
        needed = {n for lane in wanted for s in lanes[lane] for n in s.needs}
        if any(s.name in needed for s in lanes["tools"]):
            wanted.add("tools")
        lanes = {name: steps for name, steps in lanes.items() if name in wanted}
        present = {s.name for steps in lanes.values() for s in steps}
        for steps in lanes.values():  # a step of a lane not run is not waited for
            for step in steps:
                step.needs = tuple(n for n in step.needs if n in present)
    for steps in lanes.values():
        for step in steps:
            _BY_NAME[step.name] = step
    _LANES.update(lanes)
    LOGS.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    say(f"lanes: {'; '.join(f'{n}: ' + ', '.join(s.name for s in st) for n, st in lanes.items())}"
        f" (as {'root' if ROOT else 'uid ' + str(os.geteuid())}; logs in .ci/logs/)")  # fmt: skip
    walls: dict[str, float] = {}
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    threads = [
        threading.Thread(target=run_lane, args=(name, steps, env, walls), name=name)
        for name, steps in lanes.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    steps = [step for lane in lanes.values() for step in lane]

    print("\n===== lanes (wall time) =====")
    for name, lane_steps in lanes.items():
        parts = ", ".join(f"{s.name} {s.seconds:.0f}s {s.status}" for s in lane_steps)
        print(f"{name:6} {walls.get(name, 0):7.0f}s  ({parts})")

    cases = [(step.name, *case) for step in steps if step.pytest for case in junit_cases(step)]
    print("\n===== the slowest 20 tests (setup, call and teardown), all lanes =====")
    for name, test_id, seconds, _ in sorted(cases, key=lambda c: -c[2])[:20]:
        print(f"{seconds:8.2f}s  {name:11} {test_id}")

    skips = [(name, test_id, reason) for name, test_id, _, reason in cases if reason is not None]
    unexpected = [s for s in skips if not expected(*s)]
    print(
        f"\n===== skips: {len(skips)}, of which unexpected: {len(unexpected) if ROOT else 'not checked (not root)'} ====="
    )
    for name, test_id, reason in skips:
        mark = "UNEXPECTED " if ROOT and (name, test_id, reason) in unexpected else ""
        print(f"{mark}{name:11} {test_id}: {reason}")

    failed_steps = [s.name for s in steps if s.status != "passed"]
    total: dict[str, int] = {}
    for step in steps:
        for word, number in step.counts.items():
            total[word] = total.get(word, 0) + number
    print()
    if failed_steps:
        print(f"ci: steps that did not pass: {', '.join(failed_steps)} (logs in .ci/logs/)")
    if ROOT and unexpected:
        print(f"ci: {len(unexpected)} unexpected skip(s) as root (see above): the run fails")
    if total.get("error"):
        print(f"ci: {total['error']} error(s) in setup or teardown, counted as failed below")
    print(f"ci: wall time {time.monotonic() - _START:.0f}s")
    line = summary_line(total)
    (LOGS / "summary.txt").write_text(line + "\n")
    print(line, flush=True)
    failed = total.get("failed", 0) + total.get("error", 0)
    return 1 if failed_steps or failed or (ROOT and unexpected) else 0


def summary_line(total: dict[str, int]) -> str:
    """`N passed, N failed[, N skipped]`: errors in setup or teardown count as failed."""
    failed = total.get("failed", 0) + total.get("error", 0)
    line = f"{total.get('passed', 0)} passed, {failed} failed"
    if total.get("skipped"):
        line += f", {total['skipped']} skipped"
    return line


if __name__ == "__main__":
    sys.exit(main())
