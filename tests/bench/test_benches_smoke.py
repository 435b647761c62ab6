"""A smoke run of each benchmark: at a tiny size, it exits 0 and prints its figures' header.

That is all this checks. No figure is asserted (they depend on the machine), so a bench
that runs but measures the wrong thing passes here; what fails here is a change that
breaks a bench's imports, its flags or the interfaces it drives, rather than its next
real run. bench/chaos/hostile.py runs the chaos suite's hostile-reporter scenario itself
(tests/chaos/test_hostile_reporters.py, its assertions included) with 5 services for 10 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ome_routing_dev.devcluster.debian import missing_packages

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Bench:
    script: str
    #: its flags for a tiny size
    tiny: str
    #: a line of the figures it prints (stdout)
    header: str
    #: Debian's packages it polls or loads through: {program: package}
    programs: tuple[tuple[str, str], ...] = ()
    #: why it needs root, if it does
    root: str = ""
    #: whether it runs the gateways (tests/bench/conftest.py builds them first)
    gateways: bool = False


NGINX = (("nginx", "nginx-light"),)
BENCHES = [
    Bench("report_decoding/run.py", "--rounds 1", "this tree"),
    Bench(
        "reporter_counting/run.py",
        "--services 20 --pods 3 --rounds 1",
        "answer, nothing changed:",
    ),
    Bench(
        "probe_lag/run.py",
        "--homes 50 --period 1s --warmup 1 --seconds 2",
        "lastProbeTime lag behind its deadline",
        NGINX,
    ),
    Bench(
        "poll_throughput/run.py",
        "--seconds 1 --rounds 1 --saturate-homes 50 --lag-homes 50 --lag-period 1 --lag-seconds 2 --source",
        "(d) observer, 50 homes",
        (*NGINX, ("wrk", "wrk")),
    ),
    Bench(
        "controller_scale/run.py",
        "--services 3 --probes 1 --trials 1 --steady-seconds 1 --quiet-seconds 1 --no-restart",
        '"converge_seconds"',
        NGINX,
    ),
    Bench(
        "sharding/run.py",
        "--services 6 --probes 3 --shards 8 --period 2s --steady-seconds 1 --quiet-seconds 1"
        " --trials 1 --lease 8s,6s,1s",
        "| SIGKILL one of 3 | value |",
        NGINX,
    ),
    Bench(
        "sharding/share.py",
        "--services 6 --shards 8 --period 2s --steady-seconds 1 --quiet-seconds 1 --lease 8s,6s,1s",
        "| process | homes | polls/s |",
        NGINX,
    ),
    Bench("list_pages/run.py", "--services 5 --pages 3,2 --rounds 1", "| page | cached |"),
    Bench(
        "lease_requests/run.py",
        "--shards 8 --turns 2 --turn 0.5 --poll-seconds 1 --homes 50 --idle-seconds 1",
        "| a renewal on the wire (`LeaseWire.replace`) |",
        NGINX,
    ),
    Bench(
        "publisher_latency/run.py",
        "--services 1 --trials 1",
        "TrafficMap write -> HTTPRoute write",
    ),
    Bench(
        "gateway_split/run.py",
        "--requests 30 --trials 1",
        "change latency over 1 trials",
        root="not root, so no gateway traffic (it needs a private mount namespace)",
        gateways=True,
    ),
    # the chaos suite's scenario, run whole at a tiny size: its figures print at the end
    Bench(
        "chaos/hostile.py",
        "--services 5 --seconds 10 --warm-up 5",
        "test_a_thousand_hostile_homes_get_only_the_guides_reasons_and_flat_memory:"
        " polls per home per period, median / min = ",
    ),
]


def bench_id(bench: Bench) -> str:
    """A bench's test id: its script's path under bench/, without `/run.py` or `.py`."""
    return bench.script.removesuffix(".py").removesuffix("/run")


@pytest.mark.parametrize("bench", BENCHES, ids=[bench_id(b) for b in BENCHES])
def test_the_bench_exits_0_at_a_tiny_size_and_prints_its_figures_header(bench: Bench) -> None:
    if bench.root and os.geteuid() != 0:
        pytest.skip(f"bench/{bench.script}: {bench.root}")
    missing = missing_packages(dict(bench.programs))
    if missing and os.geteuid() != 0:
        pytest.skip(f"bench/{bench.script} needs {', '.join(missing)}: install them as root")
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / bench.script), *bench.tiny.split()],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode == 0, output
    assert bench.header in result.stdout, output
