"""Polls and probes sharing one request budget: how far `lastProbeTime` lags its deadline.

Starts nginx on loopback answering every home's poll (`/h<n>/capacity`) and probe
(`/h<n>/v1/models`) with 200, then runs, in this process, one `Observer` (a capacity
poll per home) and one `Prober` (a health probe per home) on one `PollClient`: one
`maxConcurrentRequests` budget for both, as the controller runs them.

For every probe it records how long after its deadline the attempt finished (the time
`lastProbeTime` lags the period: the wait for a worker and a budget slot, plus the
request), and the seconds each poll and probe waited for a slot, which is what the
controller's `ome_routing_observer_budget_wait_seconds{kind}` histogram shows. It prints
p50/p99/max of the lag after a warm-up, probes and polls per second, and the budget
wait by kind. The homes are set before the observer and the prober start, as at a
controller's start, so both spread their first requests over a period.

Scenarios: `--scenario ok` (10,000 homes, period 10s, budget 16: 2,000 requests/s,
below saturation) and `--scenario small` (the same homes with period 2s on a budget of
1: the demand is above what one slot can serve, so the lag grows period after period and
the wait shows it). Needs Debian's `nginx-light`, installed with apt-get when missing (as
root). Not a test: the numbers depend on the machine. In seconds, for a check that it runs
(`tests/bench`): --homes 50 --period 1s --warmup 1 --seconds 2
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nginx_reporter import nginx_reporter

from ome_routing.core.durations import Duration
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.proberules import ProbePolicy
from ome_routing.metrics import RoutingMetrics
from ome_routing.observer import Observer, PollClient, PollEvent, RequestBudget, eventloop, tune_gc
from ome_routing.observer.prober import ProbeEvent, Prober

SCENARIOS = {
    "ok": {"homes": 10_000, "period": "10s", "budget": 16},
    "small": {"homes": 10_000, "period": "2s", "budget": 1},
}


class Recorder:
    """Lags and waits as they come, split at the end of the warm-up."""

    def __init__(self, metrics: RoutingMetrics, measure_from: float) -> None:
        self.metrics = metrics
        self.measure_from = measure_from
        self.lags: list[tuple[float, float]] = []  # (finished, lag)
        self.probes = 0
        self.polls = 0

    def probe_finished(self, event: ProbeEvent) -> None:
        now = time.monotonic()
        self.metrics.budget_wait.labels(kind="probe").observe(event.waited)
        if now >= self.measure_from:
            self.probes += 1
            self.lags.append((now, event.waited + event.latency))

    def poll_finished(self, event: PollEvent) -> None:
        self.metrics.budget_wait.labels(kind="capacity").observe(event.waited)
        if time.monotonic() >= self.measure_from:
            self.polls += 1


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def budget_wait(metrics: RoutingMetrics, kind: str) -> tuple[float, float]:
    """(count, mean seconds) of the budget-wait histogram for `kind`."""
    count = total = 0.0
    for family in metrics.registry.collect():
        if family.name != "ome_routing_observer_budget_wait_seconds":
            continue
        for sample in family.samples:
            if sample.labels.get("kind") != kind:
                continue
            if sample.name.endswith("_count"):
                count = sample.value
            elif sample.name.endswith("_sum"):
                total = sample.value
    return count, (total / count if count else 0.0)


async def run(args: argparse.Namespace, base: str) -> None:
    scenario = SCENARIOS[args.scenario]
    homes = args.homes or int(scenario["homes"])
    period = Duration.parse(args.period or str(scenario["period"]))
    budget_size = args.budget or int(scenario["budget"])
    timeout = Duration.parse("3s") if period.seconds > 3 else Duration(period.nanoseconds // 2)
    poll = CapacityPolicy(
        path="/capacity",
        method="GET",
        format="Report",
        samples=3,
        quorum=2,
        period=period,
        timeout=timeout,
        max_age=Duration(period.nanoseconds * 3),
    )
    probe = ProbePolicy(
        path="/v1/models",
        method="GET",
        accept_statuses=(200,),
        gate_statuses=(503,),
        period=period,
        timeout=timeout,
        failure_threshold=3,
        success_threshold=2,
        all_failed_policy="PreserveTraffic",
    )
    metrics = RoutingMetrics()
    started = time.monotonic()
    recorder = Recorder(metrics, started + args.warmup)
    async with PollClient(RequestBudget(budget_size), 65536) as client:
        observer = Observer(client, lambda key, verdict: None, stats=recorder)
        prober = Prober(
            client, lambda key, state: None, clock=lambda: datetime.now(UTC), stats=recorder
        )
        for number in range(homes):
            observer.set_home(number, f"{base}/h{number}", poll)
            prober.set_target(number, f"{base}/h{number}", probe)
        # as at a controller's start: both spread their homes' first requests over a period
        await observer.start()
        await prober.start()
        await asyncio.sleep(args.warmup + args.seconds)
        # a loaded machine oversleeps: count the seconds that really passed
        measured = time.monotonic() - recorder.measure_from
        recorder.measure_from = float("inf")
        await prober.stop()
        await observer.stop()
    lags = [lag for _, lag in recorder.lags]
    print(
        f"scenario {args.scenario}: {homes} homes, polls and probes every {period}, "
        f"budget {budget_size}, warm-up {args.warmup:.0f}s, measured {measured:.1f}s"
    )
    print(
        f"  probes/s {recorder.probes / measured:.0f}, polls/s {recorder.polls / measured:.0f} "
        f"(demand {2 * homes / period.seconds:.0f} requests/s)"
    )
    if lags:
        thirds = [
            [lag for at, lag in recorder.lags if started + args.warmup + i * measured / 3 <= at]
            for i in range(3)
        ]
        print(
            f"  lastProbeTime lag behind its deadline: p50 {statistics.median(lags) * 1000:.1f} ms, "
            f"p99 {percentile(lags, 0.99) * 1000:.1f} ms, max {max(lags) * 1000:.1f} ms"
        )
        print(
            "  p99 lag over the measured thirds (from each third to the end): "
            + ", ".join(f"{percentile(t, 0.99) * 1000:.0f} ms" for t in thirds if t)
        )
    for kind in ("probe", "capacity"):
        count, mean = budget_wait(metrics, kind)
        print(
            f'  ome_routing_observer_budget_wait_seconds{{kind="{kind}"}}: '
            f"count {count:.0f}, mean {mean * 1000:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="ok")
    parser.add_argument("--homes", type=int, default=0)
    parser.add_argument("--period", default="")
    parser.add_argument("--budget", type=int, default=0)
    parser.add_argument("--warmup", type=float, default=12.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    tune_gc()
    with nginx_reporter(location="~ /(capacity|v1/models)$") as base:
        factory = eventloop.loop_factory("uvloop") or asyncio.new_event_loop
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(run(args, base))


if __name__ == "__main__":
    main()
