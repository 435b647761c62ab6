"""Capacity-poll throughput: the observer against a C load generator, on one reporter.

Starts nginx on loopback as a reporter that answers every poll with
`{"servable": 4, "observedAt": "<now>"}`, then, in one run:

  (a) wrk against it (C, keep-alive, the budget's concurrency),
  (b) a bare aiohttp fetch loop with the budget's concurrency,
  (c) the observer polling N homes pointed at it, saturated (demand above capacity),
  (d) the observer with 10,000 homes below saturation: p99 of (interval - period).

Prints polls/s of (a)-(c), the ratios (c)/(b) and (c)/(a), CPU seconds per 1,000 polls,
the interval lag, the longest garbage collection of each phase, and the load average
before and after. The process calls `observer.tune_gc()` first, as the controller does
at startup (`--no-tune-gc` keeps CPython's defaults, for comparison). Needs `nginx` and `wrk` on PATH (Debian:
`apt-get install -y nginx-light wrk`). Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Hashable
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nginx_reporter import nginx_reporter

from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.observer import (
    Observer,
    Outcome,
    PollClient,
    PollEvent,
    RequestBudget,
    tune_gc,
)


def run_wrk(url: str, connections: int, seconds: float) -> float:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s", url],
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
    """The longest garbage collection since the last `reset`, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def reset(self) -> None:
        self.longest = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.longest = max(self.longest, time.perf_counter() - self._start)


class Recorder:
    """Counts polls and, when asked, keeps each home's send times."""

    def __init__(self, keep_times: bool) -> None:
        self.count = 0
        self.failures = 0
        self.keep_times = keep_times
        self.sent: dict[Hashable, list[float]] = {}

    def poll_finished(self, event: PollEvent) -> None:
        self.count += 1
        if event.outcome is not Outcome.OK:
            self.failures += 1
        if self.keep_times:
            self.sent.setdefault(event.key, []).append(event.started + event.waited)


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
    keep_times: bool,
) -> tuple[Recorder, float, float]:
    """Run the observer; returns its recorder, polls/s and CPU seconds per 1,000 polls."""
    recorder = Recorder(keep_times)
    async with PollClient(RequestBudget(budget), 65536, keepalive_seconds=15.0) as client:
        observer = Observer(client, lambda key, verdict: None, stats=recorder)
        await observer.start()
        policy = a_policy(period)
        for i in range(homes):
            observer.set_home(f"bench/isvc-{i}/worker-a", endpoint, policy)
        await asyncio.sleep(warmup)
        count0, cpu0, t0 = recorder.count, time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        polls = recorder.count - count0
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
        await observer.stop()
    return recorder, polls / wall, cpu / max(polls, 1) * 1000


def interval_lags(recorder: Recorder, period: float) -> list[float]:
    lags: list[float] = []
    for times in recorder.sent.values():
        lags.extend((later - earlier) - period for earlier, later in itertools.pairwise(times))
    return lags


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main_async(
    args: argparse.Namespace, endpoint: str, wrk_rate: float, collections: Collections
) -> None:
    url = endpoint + "/capacity"
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    for round_ in range(1, args.rounds + 1):
        collections.reset()
        bare_rate, bare_cpu = await bare_fetch_loop(url, args.budget, args.seconds)
        print(
            f"(b) bare aiohttp loop, {args.budget} at once:   {bare_rate:9.0f} polls/s  "
            f"({bare_cpu:.3f} CPU s per 1,000; longest GC {collections.longest * 1000:.1f} ms)"
            f"   round {round_}"
        )
        collections.reset()
        saturated, obs_rate, obs_cpu = await observe(
            endpoint,
            args.saturate_homes,
            args.saturate_period,
            args.budget,
            args.seconds,
            2.0,
            False,
        )
        print(
            f"(c) observer, {args.saturate_homes} homes every {args.saturate_period}s: "
            f"{obs_rate:9.0f} polls/s  ({obs_cpu:.3f} CPU s per 1,000; "
            f"{saturated.failures} failed; longest GC {collections.longest * 1000:.1f} ms)"
        )
        ratios.append(obs_rate / bare_rate)
        cpu_ratios.append(obs_cpu / bare_cpu)
        print(
            f"    (c)/(b) = {ratios[-1]:.2f}   (c)/(a) = {obs_rate / wrk_rate:.3f}   "
            f"CPU per poll (c)/(b) = {cpu_ratios[-1]:.2f}"
        )
    if args.rounds > 1:
        print(
            f"    over {args.rounds} rounds: (c)/(b) median {statistics.median(ratios):.2f} "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f}); CPU per poll (c)/(b) median "
            f"{statistics.median(cpu_ratios):.2f}"
        )
    collections.reset()
    lagged, lag_rate, lag_cpu = await observe(
        endpoint, args.lag_homes, args.lag_period, args.budget, args.lag_seconds, 0.0, True
    )
    lags = interval_lags(lagged, args.lag_period)
    print(
        f"(d) observer, {args.lag_homes} homes every {args.lag_period}s: "
        f"{lag_rate:9.0f} polls/s  ({lag_cpu:.3f} CPU s per 1,000; {lagged.failures} failed; "
        f"longest GC {collections.longest * 1000:.1f} ms)"
    )
    if lags:
        print(
            f"    interval - period over {len(lags)} intervals: "
            f"median {statistics.median(lags) * 1000:.1f} ms, "
            f"p99 {percentile(lags, 0.99) * 1000:.1f} ms, max {max(lags) * 1000:.1f} ms"
        )


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=16, help="maxConcurrentRequests")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of (a), (b), (c)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="(b) then (c), this many times in a row"
    )
    parser.add_argument("--saturate-homes", type=int, default=5000)
    parser.add_argument("--saturate-period", type=float, default=1.0)
    parser.add_argument("--lag-homes", type=int, default=10_000)
    parser.add_argument("--lag-period", type=float, default=10.0)
    parser.add_argument("--lag-seconds", type=float, default=22.0)
    parser.add_argument(
        "--no-tune-gc",
        action="store_true",
        help="keep CPython's garbage-collector defaults instead of observer.tune_gc()",
    )
    args = parser.parse_args()
    for tool in ("nginx", "wrk"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            raise SystemExit(f"{tool} is missing: apt-get install -y nginx-light wrk")
    if not args.no_tune_gc:
        tune_gc()  # as the controller does at startup
    collections = Collections()
    print(
        f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} CPUs, "
        f"gc thresholds {gc.get_threshold()}, load average {load_average()}"
    )
    with nginx_reporter() as endpoint:
        wrk_rate = run_wrk(endpoint + "/capacity", args.budget, args.seconds)
        print(f"(a) wrk, {args.budget} connections:            {wrk_rate:9.0f} polls/s")
        asyncio.run(main_async(args, endpoint, wrk_rate, collections))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
