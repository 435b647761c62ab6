"""Capacity-poll throughput: the observer against a C load generator, on one reporter.

Starts nginx on loopback as a reporter that answers every poll with
`{"servable": 4, "observedAt": "<now>"}`, then, in one run:

  (a) wrk against it (C, keep-alive, the budget's concurrency),
  (b) a bare aiohttp fetch loop with the budget's concurrency,
  (c) the observer polling N homes pointed at it, saturated (demand above capacity),
  (d) the observer with 10,000 homes below saturation: p99 of (interval - period).

(b) and (c) run `--rounds` times, each round at the same time in two processes that share
one CPU, so that both see the same machine (`--apart` runs them one after the other:
on a shared machine, its speed drifts between the two). Each of (b)-(d) runs in a fresh
Python process, as a controller would: one phase's heap (thousands of homes made and
dropped) must not weigh on the next. Each calls `observer.tune_gc()` first, as the controller does at
startup (`--no-tune-gc` keeps CPython's defaults, for comparison). nginx is pinned to
one CPU and the phases to another (`--no-pin` leaves placement to the scheduler).

Prints polls/s of (a)-(c), the ratios (c)/(b) and (c)/(a), CPU seconds per 1,000 polls,
the interval lag, the longest garbage collection of each phase, and the load average
before and after. Needs Debian's `nginx-light` and `wrk`, installed with apt-get when
missing (as root). Not a test: numbers depend on the machine. In seconds, for a check that
it runs (`tests/bench`): --seconds 1 --rounds 1 --saturate-homes 50 --lag-homes 50
--lag-period 1 --lag-seconds 2 --source
"""

from __future__ import annotations

import argparse
import array
import asyncio
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from minimal_client import minimal_loop
from nginx_reporter import ensure_bench_programs, nginx_reporter

from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.observer import (
    Observer,
    Outcome,
    PollClient,
    PollEvent,
    RequestBudget,
    eventloop,
    pace_collections,
    tune_gc,
)
from ome_routing.observer.tuning import MIDDLE_THRESHOLD, YOUNG_THRESHOLD
from ome_routing_dev.devcluster.compiled import build_compiled


def run_wrk(wrk: Path, url: str, connections: int, seconds: float) -> float:
    out = subprocess.run(
        [str(wrk), "-t1", f"-c{connections}", f"-d{int(seconds)}s", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if match is None:
        raise SystemExit(f"cannot read wrk's output:\n{out}")
    return float(match.group(1))


async def bare_fetch_loop(url: str, concurrency: int, seconds: float) -> tuple[float, float]:
    """Polls/s and CPU seconds per 1,000 of plain aiohttp GETs that read the body."""
    count = 0
    async with aiohttp.ClientSession() as session:
        stop_at = time.monotonic() + seconds

        async def worker() -> None:
            nonlocal count
            while time.monotonic() < stop_at:
                async with session.get(url) as response:
                    await response.read()
                count += 1

        cpu0, t0 = time.process_time(), time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    return count / wall, cpu / count * 1000


class Collections:
    """The longest garbage collection in this process since it was made, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.longest = 0.0
        #: the longest between `measure()` and `done()`: set-up and stop left out
        self.longest_measured = 0.0
        self._measuring = False
        #: the same in CPU seconds: a collection that waited for the CPU counts less
        self.longest_measured_cpu = 0.0
        self._start = 0.0
        self._start_cpu = 0.0
        gc.callbacks.append(self._callback)

    def measure(self) -> None:
        self.longest_measured = self.longest_measured_cpu = 0.0
        self._measuring = True

    def done(self) -> None:
        self._measuring = False

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start, self._start_cpu = time.perf_counter(), time.process_time()
        else:
            took = time.perf_counter() - self._start
            self.longest = max(self.longest, took)
            if self._measuring:
                cpu = time.process_time() - self._start_cpu
                self.longest_measured = max(self.longest_measured, took)
                self.longest_measured_cpu = max(self.longest_measured_cpu, cpu)


class Recorder:
    """Counts polls and, when asked, the lag of each home's interval between two polls.

    The lags go into one `array` and each home's last send time replaces the one before,
    so keeping them does not grow the interpreter's heap: a heap that grows brings a full
    collection (`observer.pace_collections`), whose stall the lags would then measure,
    and which a controller at rest does not have.
    """

    def __init__(self, period: float | None) -> None:
        self.count = 0
        self.failures = 0
        self.period = period
        self.measuring = False
        self.last_sent: dict[Hashable, float] = {}
        self.lags = array.array("d")

    def poll_finished(self, event: PollEvent) -> None:
        self.count += 1
        if event.outcome is not Outcome.OK:
            self.failures += 1
        if self.period is not None:
            sent = event.started + event.waited
            before = self.last_sent.get(event.key)
            self.last_sent[event.key] = sent
            if self.measuring and before is not None:
                self.lags.append(sent - before - self.period)


class Stalls:
    """How long the event loop was held: the lateness of a 5 ms sleep, over and over.

    A poll due while the loop is held goes out late by up to as much, so the longest
    stalls bound the interval lag from the observer's own side.
    """

    TICK = 0.005
    #: stalls longer than this are counted
    COUNTED = 0.02

    def __init__(self) -> None:
        self.measuring = False
        self.longest = 0.0
        self.counted = 0

    async def watch(self) -> None:
        clock = time.perf_counter
        while True:
            before = clock()
            await asyncio.sleep(self.TICK)
            late = clock() - before - self.TICK
            if self.measuring:
                self.longest = max(self.longest, late)
                if late > self.COUNTED:
                    self.counted += 1


def a_policy(period: float) -> CapacityPolicy:
    return CapacityPolicy(
        path="/capacity",
        method="GET",
        format="Report",
        samples=10,
        quorum=2,
        period=Duration.of_seconds(period),
        timeout=Duration.parse("3s"),
        max_age=Duration.parse("30s"),
    )


async def observe(
    endpoint: str,
    homes: int,
    period: float,
    budget: int,
    seconds: float,
    warmup: float,
    keep_lags: bool,
    collections: Collections,
    stalls: Stalls | None = None,
) -> tuple[Recorder, float, float]:
    """Run the observer; returns its recorder, polls/s and CPU seconds per 1,000 polls."""
    recorder = Recorder(period if keep_lags else None)
    watching = None if stalls is None else asyncio.ensure_future(stalls.watch())
    async with PollClient(RequestBudget(budget), 65536, keepalive_seconds=15.0) as client:
        observer = Observer(client, lambda key, verdict: None, stats=recorder)
        policy = a_policy(period)
        # homes held at start, as after a restart: their first polls spread over a period
        for i in range(homes):
            observer.set_home(f"bench/isvc-{i}/worker-a", endpoint, policy)
        await observer.start()
        await asyncio.sleep(warmup)
        recorder.measuring = True  # the intervals that end after the warm-up
        if stalls is not None:
            stalls.measuring = True
        collections.measure()
        count0, cpu0, t0 = recorder.count, time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        polls = recorder.count - count0
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
        collections.done()
        if watching is not None:
            watching.cancel()
        await observer.stop()
    return recorder, polls / wall, cpu / max(polls, 1) * 1000


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run_phase(args: argparse.Namespace, endpoint: str) -> dict[str, object]:
    """One phase, in this (fresh) process: what it measured, for the parent to print."""
    collections = Collections()
    result: dict[str, object] = {}
    # the collector paced from the event loop, as the controller runs it
    pacer = None if args.no_tune_gc or args.no_pace else asyncio.ensure_future(pace_collections())
    # with --together, (b) and (c) measure over the same seconds, from `start_at` on
    lead = 2.0 if args.start_at is None else args.start_at - time.time()
    if args.phase == "bare":
        if args.start_at is not None:
            await asyncio.sleep(lead)
        rate, cpu = await bare_fetch_loop(endpoint + "/capacity", args.budget, args.seconds)
        result.update(rate=rate, cpu=cpu, failed=0)
    elif args.phase == "minimal":
        if args.start_at is not None:
            await asyncio.sleep(lead)
        rate, cpu = await minimal_loop(endpoint + "/capacity", args.budget, args.seconds)
        result.update(rate=rate, cpu=cpu, failed=0)
    elif args.phase == "saturate":
        recorder, rate, cpu = await observe(
            endpoint,
            args.saturate_homes,
            args.saturate_period,
            args.budget,
            args.seconds,
            lead,
            False,
            collections,
        )
        result.update(rate=rate, cpu=cpu, failed=recorder.failures)
    else:
        stalls = Stalls()
        recorder, rate, cpu = await observe(
            endpoint,
            args.lag_homes,
            args.lag_period,
            args.budget,
            args.lag_seconds,
            args.lag_warmup,
            True,
            collections,
            stalls,
        )
        result.update(rate=rate, cpu=cpu, failed=recorder.failures)
        result["lags"] = recorder.lags.tolist()
        result.update(longest_stall=stalls.longest, stalls=stalls.counted)
    result["longest_gc"] = collections.longest
    result["longest_gc_measured"] = collections.longest_measured
    result["longest_gc_measured_cpu"] = collections.longest_measured_cpu
    if pacer is not None:
        pacer.cancel()
    return result


def start_phase(endpoint: str, name: str, *extra: str) -> subprocess.Popen[str]:
    """Start a phase in a fresh process, with the same options, on the same CPU.

    `against` is the observer's phase (c) run on the source tree of `--against`.
    """
    # the observer of this tree, whatever the environment installed (a worktree's run
    # must not measure the main checkout's): compiled, as the image ships it, unless
    # `--source`; (c) of `--against` runs that tree's source instead
    source = TREE[0] if TREE else str(Path(__file__).resolve().parents[2] / "src")
    if name == "against":
        name = "saturate"
        source = str(Path(AGAINST[0], "src").resolve())
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, __file__, *sys.argv[1:], "--phase", name, "--endpoint", endpoint]
    return subprocess.Popen(
        [*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


#: the source tree of `--against`, if given
AGAINST: list[str] = []
#: the compiled tree of this checkout (`devcluster.compiled`), unless `--source`
TREE: list[str] = []


def figures_of(name: str, child: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"phase {name} failed:\n{err}")
    figures: dict[str, Any] = json.loads(out.splitlines()[-1])
    return figures


def phase(endpoint: str, name: str) -> dict[str, Any]:
    return figures_of(name, start_phase(endpoint, name))


#: Seconds from starting the phases of a round to the first of the seconds they measure
#: together. Within them, three or four processes share one CPU to start: imports, and (c)
#: its 20,000 homes and the full collection the pacer makes once it sees the heap grown
#: by them (0.1-0.15 s), which used to fall in the measured seconds of some rounds when
#: the machine ran slow (3 s then): a cost of (c)'s start, not of its polls.
LEAD_SECONDS = 6.0


def phases_together(endpoint: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """Phases at once, sharing one CPU, measured over the same seconds."""
    start_at = str(time.time() + LEAD_SECONDS)
    children = {name: start_phase(endpoint, name, "--start-at", start_at) for name in names}
    return {name: figures_of(name, child) for name, child in children.items()}


def report(args: argparse.Namespace, endpoint: str, wrk_rate: float) -> None:
    references = [name for name in ("bare", "minimal") if name in args.references]
    names = [*references, "saturate"]
    if args.against:
        AGAINST.append(args.against)
        names.append("against")
    against_ratios: list[float] = []
    ratios: dict[str, list[float]] = {name: [] for name in references}
    cpu_ratios: dict[str, list[float]] = {name: [] for name in references}
    for round_ in range(1, args.rounds + 1):
        if args.apart:
            figures = {name: phase(endpoint, name) for name in names}
        else:
            figures = phases_together(endpoint, names)
        observed = figures["saturate"]
        for name in references:
            got = figures[name]
            print(
                f"{LABELS[name]}{got['rate']:9.0f} polls/s  ({got['cpu']:.3f} CPU s per 1,000;"
                f" longest GC {got['longest_gc'] * 1000:.1f} ms)   round {round_}"
            )
        print(
            f"(c) observer, {args.saturate_homes} homes every {args.saturate_period}s: "
            f"{observed['rate']:9.0f} polls/s  ({observed['cpu']:.3f} CPU s per 1,000; "
            f"{observed['failed']} failed; longest GC {observed['longest_gc'] * 1000:.1f} ms, "
            f"in the measured seconds {observed['longest_gc_measured'] * 1000:.1f} ms)"
        )
        line = [f"(c)/(a) = {observed['rate'] / wrk_rate:.3f}"]
        for name in references:
            ratios[name].append(observed["rate"] / figures[name]["rate"])
            cpu_ratios[name].append(observed["cpu"] / figures[name]["cpu"])
            line.append(
                f"(c)/{SHORT[name]} = {ratios[name][-1]:.2f}, "
                f"CPU per poll (c)/{SHORT[name]} = {cpu_ratios[name][-1]:.2f}"
            )
        print("    " + "   ".join(line))
        if args.against:
            other = figures["against"]
            against_ratios.append(observed["cpu"] / other["cpu"])
            line = [
                f"(c) on {args.against}: {other['rate']:9.0f} polls/s  ({other['cpu']:.3f} CPU s per 1,000)"
            ]
            if "minimal" in figures:
                line.append(f"CPU per poll /(e) = {other['cpu'] / figures['minimal']['cpu']:.2f}")
            line.append(f"CPU per poll (c) / this = {against_ratios[-1]:.2f}")
            print("    " + "   ".join(line))
    if args.rounds > 1:
        for name in references:
            print(
                f"    over {args.rounds} rounds: (c)/{SHORT[name]} median "
                f"{statistics.median(ratios[name]):.2f} (min {min(ratios[name]):.2f}, max "
                f"{max(ratios[name]):.2f}); CPU per poll (c)/{SHORT[name]} median "
                f"{statistics.median(cpu_ratios[name]):.2f} (min {min(cpu_ratios[name]):.2f}, "
                f"max {max(cpu_ratios[name]):.2f})"
            )
    if args.against and args.rounds > 1:
        print(
            f"    over {args.rounds} rounds: CPU per poll (c) / (c) on {args.against} median "
            f"{statistics.median(against_ratios):.2f} (min {min(against_ratios):.2f}, "
            f"max {max(against_ratios):.2f})"
        )
    lagged = phase(endpoint, "lag")
    lags: list[float] = lagged["lags"]
    print(
        f"(d) observer, {args.lag_homes} homes every {args.lag_period}s: "
        f"{lagged['rate']:9.0f} polls/s  ({lagged['cpu']:.3f} CPU s per 1,000; "
        f"{lagged['failed']} failed; longest GC {lagged['longest_gc'] * 1000:.1f} ms, "
        f"after the warm-up {lagged['longest_gc_measured'] * 1000:.1f} ms, "
        f"{lagged['longest_gc_measured_cpu'] * 1000:.1f} ms of CPU)"
    )
    if lags:
        print(
            f"    interval - period over {len(lags)} intervals: "
            f"median {statistics.median(lags) * 1000:.1f} ms, "
            f"p99 {percentile(lags, 0.99) * 1000:.1f} ms, max {max(lags) * 1000:.1f} ms"
        )
    print(
        f"    event loop held: longest {lagged['longest_stall'] * 1000:.1f} ms, "
        f"{lagged['stalls']} times over {Stalls.COUNTED * 1000:.0f} ms after the warm-up"
    )


LABELS = {
    "bare": "(b) bare aiohttp loop, 16 at once:          ",
    "minimal": "(e) asyncio.Protocol + httptools, 16 at once: ",
}
SHORT = {"bare": "(b)", "minimal": "(e)"}


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=16, help="maxConcurrentRequests")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of (a), (b), (c)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of (b) and (c)")
    parser.add_argument("--saturate-homes", type=int, default=5000)
    parser.add_argument("--saturate-period", type=float, default=1.0)
    parser.add_argument("--lag-homes", type=int, default=10_000)
    parser.add_argument("--lag-period", type=float, default=10.0)
    parser.add_argument("--lag-seconds", type=float, default=22.0)
    parser.add_argument(
        "--lag-warmup",
        type=float,
        default=0.0,
        help="seconds of (d) before it starts counting (0: from the moment the homes are set)",
    )
    parser.add_argument(
        "--no-tune-gc",
        action="store_true",
        help="keep CPython's garbage-collector defaults instead of observer.tune_gc()",
    )
    parser.add_argument(
        "--no-pace",
        action="store_true",
        help="tune_gc() without pace_collections(): the collector's own triggers, full "
        "collections every 10 middle ones (as before the event loop paced it)",
    )
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="let the scheduler place processes instead of pinning nginx and this one",
    )
    parser.add_argument(
        "--apart",
        action="store_true",
        help="run (b) and (c) of a round one after the other, each with a CPU to itself, "
        "instead of at the same time sharing one",
    )
    parser.add_argument(
        "--loop",
        choices=eventloop.NAMES,
        default="uvloop",
        help="the event loop of every Python phase (uvloop, as the controller, by default)",
    )
    parser.add_argument(
        "--references",
        default="bare,minimal",
        help="the reference clients each round runs beside the observer: bare (aiohttp), "
        "minimal (asyncio.Protocol + httptools), comma-separated",
    )
    parser.add_argument(
        "--source",
        action="store_true",
        help="run the observer from this checkout's source rather than its poll path compiled "
        "with mypyc (devcluster.compiled), which the controller image ships",
    )
    parser.add_argument(
        "--against",
        metavar="TREE",
        help="also run (c) in each round, at the same time, on the source tree TREE (its "
        "src/ first on PYTHONPATH): an A/B of two versions of the observer in the same seconds",
    )
    # the parent runs each phase in a child process of its own with these
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    parser.add_argument(
        "--phase", choices=("bare", "minimal", "saturate", "lag"), help=argparse.SUPPRESS
    )
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase is not None:
        if not args.no_tune_gc:
            tune_gc()  # as the controller does at startup
            if args.no_pace:
                gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, 10)
        print(json.dumps(eventloop.run(run_phase(args, args.endpoint), args.loop)))
        return
    wrk = ensure_bench_programs({"nginx": "nginx-light", "wrk": "wrk"}, "bench/poll_throughput")[
        "wrk"
    ]
    if not args.no_tune_gc:
        tune_gc()  # to show the thresholds each phase runs with
        if args.no_pace:
            gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, 10)
    if not args.source:
        TREE.append(str(build_compiled(Path(__file__).resolve().parents[2], progress=print)))
    print(
        f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} CPUs, "
        f"gc thresholds {gc.get_threshold()}, loop {args.loop}, load average {load_average()}"
    )
    print(
        "the observer: "
        + ("this checkout's source" if args.source else f"compiled with mypyc, {TREE[0]}")
    )
    # nginx on one CPU, this process (and wrk, its child) on another: each phase gets the
    # same placement, instead of whatever the scheduler picks while it runs
    cpus = sorted(os.sched_getaffinity(0))
    pinned = not args.no_pin and len(cpus) >= 2
    if pinned:
        os.sched_setaffinity(0, {cpus[0]})
        print(f"pinned: this process and wrk to CPU {cpus[0]}, nginx to CPU {cpus[1]}")
    with nginx_reporter(cpu=cpus[1] if pinned else None) as endpoint:
        wrk_rate = run_wrk(wrk, endpoint + "/capacity", args.budget, args.seconds)
        print(f"(a) wrk, {args.budget} connections:            {wrk_rate:9.0f} polls/s")
        report(args, endpoint, wrk_rate)
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
