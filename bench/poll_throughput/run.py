"""Capacity-poll throughput: the observer against a C load generator, on one reporter.

Starts nginx on loopback as a reporter that answers every poll with
`{"servable": 4, "observedAt": "<now>"}`, then, in one run:

  (a) wrk against it (C, keep-alive, the budget's concurrency),
  (b) a bare aiohttp fetch loop with the budget's concurrency,
  (c) the observer polling N homes pointed at it, saturated (demand above capacity),
  (d) the observer with 10,000 homes below saturation: p99 of (interval - period).

Prints polls/s of (a)-(c), the ratios (c)/(b) and (c)/(a), the observer's CPU seconds
per 1,000 polls, and the interval lag. Needs `nginx` and `wrk` on PATH (Debian:
`apt-get install -y nginx-light wrk`). Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp

from ome_routing.core.config import CapacityPolicy
from ome_routing.core.durations import Duration
from ome_routing.observer import Observer, Outcome, PollClient, PollEvent, RequestBudget

NGINX_CONF = """
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    server {{
        listen 127.0.0.1:{port};
        location = /capacity {{
            default_type application/json;
            return 200 '{{"servable": 4, "observedAt": "$time_iso8601"}}';
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def nginx_reporter() -> Iterator[str]:
    """Run nginx in the foreground on a free loopback port; yields the endpoint."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="poll-bench-") as prefix:
        conf = Path(prefix) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(prefix=prefix, port=port))
        proc = subprocess.Popen(
            [binary, "-p", prefix, "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 5
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err = proc.stderr.read().decode() if proc.stderr else ""
                        raise SystemExit(f"nginx did not start: {err}") from None
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGQUIT)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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


async def main_async(args: argparse.Namespace, endpoint: str, wrk_rate: float) -> None:
    url = endpoint + "/capacity"
    bare_rate, bare_cpu = await bare_fetch_loop(url, args.budget, args.seconds)
    print(
        f"(b) bare aiohttp loop, {args.budget} at once:   {bare_rate:9.0f} polls/s  "
        f"({bare_cpu:.3f} CPU s per 1,000)"
    )
    saturated, obs_rate, obs_cpu = await observe(
        endpoint, args.saturate_homes, args.saturate_period, args.budget, args.seconds, 2.0, False
    )
    print(
        f"(c) observer, {args.saturate_homes} homes every {args.saturate_period}s: "
        f"{obs_rate:9.0f} polls/s  ({obs_cpu:.3f} CPU s per 1,000; "
        f"{saturated.failures} failed)"
    )
    print(f"    (c)/(b) = {obs_rate / bare_rate:.2f}   (c)/(a) = {obs_rate / wrk_rate:.2f}")
    lagged, lag_rate, lag_cpu = await observe(
        endpoint, args.lag_homes, args.lag_period, args.budget, args.lag_seconds, 0.0, True
    )
    lags = interval_lags(lagged, args.lag_period)
    print(
        f"(d) observer, {args.lag_homes} homes every {args.lag_period}s: "
        f"{lag_rate:9.0f} polls/s  ({lag_cpu:.3f} CPU s per 1,000; {lagged.failures} failed)"
    )
    if lags:
        print(
            f"    interval - period over {len(lags)} intervals: "
            f"median {statistics.median(lags) * 1000:.1f} ms, "
            f"p99 {percentile(lags, 0.99) * 1000:.1f} ms, max {max(lags) * 1000:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=16, help="maxConcurrentRequests")
    parser.add_argument("--seconds", type=float, default=12.0, help="length of (a), (b), (c)")
    parser.add_argument("--saturate-homes", type=int, default=5000)
    parser.add_argument("--saturate-period", type=float, default=1.0)
    parser.add_argument("--lag-homes", type=int, default=10_000)
    parser.add_argument("--lag-period", type=float, default=10.0)
    parser.add_argument("--lag-seconds", type=float, default=22.0)
    args = parser.parse_args()
    for tool in ("nginx", "wrk"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            raise SystemExit(f"{tool} is missing: apt-get install -y nginx-light wrk")
    print(f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} CPUs")
    with nginx_reporter() as endpoint:
        wrk_rate = run_wrk(endpoint + "/capacity", args.budget, args.seconds)
        print(f"(a) wrk, {args.budget} connections:            {wrk_rate:9.0f} polls/s")
        asyncio.run(main_async(args, endpoint, wrk_rate))


if __name__ == "__main__":
    main()
