"""Sharded controllers against the single leader: one load, one run, side by side.

On the local control plane, `--services` routed InferenceServices of `--homes` homes each
answered by nginx on loopback (`bench/nginx_reporter.py`), plus `--probes` services whose
homes answer from an in-process reporter whose count the bench changes (a fast poll:
samples 1, quorum 1, period 1s). In one run:

1. **The single leader** (today's default: `--leader-elect`, one process), started before
   any service exists (its resident memory then is the idle process's), then the services;
   then a second leader, started over the services as every sharded set is: the
   reference of every ratio (a process started before the services ends with less
   resident memory for the same work).
2. **Sharded**, `--sharding --shards N`, with 1, 2 and 3 replicas, each set started afresh
   over the same services.

For each set, once the shards are at rest (every one held, and `core.shards.assign` moves
none from its holder), every home is
polled by exactly one replica, every home has a ceiling and no TrafficMap has changed for
`--quiet-seconds`, a steady window of `--steady-seconds`: each replica's CPU seconds
(`/proc/PID/stat`) and resident memory at its end, as a ratio to the single leader's over
1/N (target: each replica within 1.2x); the API server's and etcd's CPU; Lease writes
(a watch of the Leases); polls and homes per replica.

Then, with 3 replicas: scale 3 -> 4 (a replica started), 4 -> 3 and 3 -> 2 (SIGTERM: the
shards are released), 2 -> 3, each with the shards and keys (services) that changed hands
as a fraction, against what `assign` predicts from the holders before (the leaver's
shards, or the joiner's share), the seconds until the shards settle and the
longest any shard was without a live holder (bound: lease duration + 2 retry periods).
Last, at rest again, SIGKILL one of 3: seconds until every one of its shards is held by
another replica, and until every one of its services' TrafficMaps has a fresh ceiling
(the window starts over with a new owner: a write without the ceiling, then one with it;
target: the lease duration plus `quorum` periods; also from each shard's new holder),
and meanwhile whether the other replicas' services kept
being reconciled: a reporter's change on their fast-poll services reaching their maps,
against the same trials before the kill, and none of their maps losing its ceiling.

Not a test: the figures depend on the machine. Usage: python bench/sharding/run.py
[--services 600] [--homes 2] [--period 5s] [--shards 64] [--steady-seconds 45]. In seconds,
for a check that it runs (`tests/bench`): --services 6 --probes 3 --shards 8 --period 2s
--steady-seconds 1 --quiet-seconds 1 --trials 1 --lease 8s,6s,1s
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from controller_scale.run import (
    ChangingReporter,
    bounded,
    cpu_seconds,
    isvc,
    log,
    placement,
    rss_bytes,
    status_field,
    wait_for_rest,
    write_values,
)
from leases import ShardWatch, lease_writes
from maps import Ceilings, ChangeTrials
from nginx_reporter import free_port, nginx_reporter

from ome_routing.core.durations import Duration, parse_duration
from ome_routing.core.shards import assign, shard_of
from ome_routing.kube.resources import InferenceService
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools

CLUSTERS = ("worker-a", "worker-b", "worker-c", "worker-d")
NAMESPACES = 10
PROBES_NAMESPACE = "bench-probes"
#: where the replicas keep their Leases
CONTROLLER_NAMESPACE = "default"
GROUP = "bench-shards"
LEADER_LEASE = "bench-leader"
FAST_POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 1,
    "quorum": 1,
    "period": "1s",
    "timeout": "500ms",
    "maxAge": "5s",
}


def chart_poll(period: Duration, quorum: int) -> dict[str, Any]:
    """The services' poll: samples quorum + 1, the period given, maxAge 3 periods."""
    seconds = period.seconds
    return {
        "path": "/capacity",
        "method": "GET",
        "format": "Report",
        "samples": quorum + 1,
        "quorum": quorum,
        "period": str(period),
        "timeout": str(Duration.of_seconds(min(seconds / 2, 3.0))),
        "maxAge": str(Duration.of_seconds(3 * seconds)),
    }


@dataclass(frozen=True)
class Timing:
    """The member and shard Leases' (and the leader's) timing, in seconds."""

    lease: float
    renew: float
    retry: float

    @classmethod
    def parse(cls, text: str) -> Timing:
        lease, renew, retry = (parse_duration(part).seconds for part in text.split(","))
        return cls(lease, renew, retry)

    def flags(self) -> list[str]:
        return [
            f"--leader-elect-lease-duration={Duration.of_seconds(self.lease)}",
            f"--leader-elect-renew-deadline={Duration.of_seconds(self.renew)}",
            f"--leader-elect-retry-period={Duration.of_seconds(self.retry)}",
        ]

    @property
    def unowned_bound(self) -> float:
        """The longest a shard may be without a live holder: lease duration + 2 retries."""
        return self.lease + 2 * self.retry


# -- replicas ---------------------------------------------------------------------------


@dataclass
class Replica:
    identity: str
    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_url: str
    _log: Any = None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def exited(self) -> SystemExit:
        """The error for a replica that is gone, with its exit code and its log's end."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        tail = "\n".join(lines[-40:])
        return SystemExit(f"{self.identity} exited ({self.process.returncode}):\n{tail}")

    async def scrape(self) -> dict[str, float]:
        """Every sample of its /metrics, summed over labels, by metric name; a replica
        that has exited is an error that shows its log."""
        try:
            async with (
                aiohttp.ClientSession(trust_env=False) as session,
                session.get(self.metrics_url) as response,
            ):
                text = await response.text()
        except aiohttp.ClientError:
            if not self.alive:
                raise self.exited() from None
            raise
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("#") or not line:
                continue
            name_labels, _, value = line.rpartition(" ")
            name = name_labels.split("{", 1)[0]
            samples[name] = samples.get(name, 0.0) + float(value)
        return samples

    async def stop(self) -> None:
        """SIGTERM (a sharded replica hands its shards over), then SIGKILL after 30 s."""
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            while self.alive and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if self.alive:
                self.process.kill()
        self.process.wait()
        if self._log is not None:
            self._log.close()


async def start_replica(
    workdir: Path, plane: LocalControlPlane, identity: str, args: argparse.Namespace, sharded: bool
) -> Replica:
    """Start `ome-routing controller`; returns once it serves /metrics."""
    metrics_port, probe_port = free_port(), free_port()
    log_path = workdir / f"{identity}.log"
    output = log_path.open("ab")
    mode = (
        ["--sharding", f"--shards={args.shards}", f"--lease-name={GROUP}"]
        if sharded
        else ["--leader-elect", f"--lease-name={LEADER_LEASE}"]
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ome_routing.cli.main",
            "controller",
            "--config",
            str(workdir / "values.yaml"),
            "--kubeconfig",
            str(plane.kubeconfig),
            "--namespace",
            CONTROLLER_NAMESPACE,
            f"--identity={identity}",
            *mode,
            *args.timing.flags(),
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}",
        ],
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    replica = Replica(identity, process, log_path, f"http://127.0.0.1:{metrics_port}/metrics")
    replica._log = output
    while True:
        try:
            await replica.scrape()
            return replica
        except aiohttp.ClientError:
            await asyncio.sleep(0.1)


# -- the load ---------------------------------------------------------------------------


@dataclass
class Load:
    services: list[tuple[str, str]]
    probes: list[tuple[str, str]]
    homes: int
    shards: int

    @property
    def keys(self) -> list[tuple[str, str]]:
        return self.services + self.probes

    def shard_of(self, key: tuple[str, str]) -> int:
        return shard_of(key[0], key[1], self.shards)

    def keys_in(self, shards: Iterable[int]) -> list[tuple[str, str]]:
        wanted = set(shards)
        return [key for key in self.keys if self.shard_of(key) in wanted]


async def create_load(
    client: AsyncClient, args: argparse.Namespace, endpoint: str, reporter: ChangingReporter
) -> Load:
    clusters = CLUSTERS[: args.homes]
    namespaces = [f"bench-{i}" for i in range(NAMESPACES)]
    for ns in [*namespaces, PROBES_NAMESPACE]:
        await client.create(Namespace(metadata=ObjectMeta(name=ns)))
    services = [(namespaces[i % NAMESPACES], f"svc-{i:04d}") for i in range(args.services)]
    probes = [(PROBES_NAMESPACE, f"probe-{i:02d}") for i in range(args.probes)]
    await bounded(
        [client.create(InferenceService.from_dict(isvc(ns, n, None))) for ns, n in services]
        + [client.create(InferenceService.from_dict(isvc(ns, n, FAST_POLL))) for ns, n in probes]
    )
    status = [
        (ns, n, placement({c: f"{endpoint}/{ns}/{n}/{c}" for c in clusters})) for ns, n in services
    ] + [
        (ns, n, placement({c: f"{reporter.url}/{n}-{c}" for c in CLUSTERS[:2]})) for ns, n in probes
    ]
    await bounded(
        [
            client.patch(InferenceService.Status, n, body, namespace=ns, patch_type=PatchType.MERGE)
            for ns, n, body in status
        ]
    )
    homes = len(services) * len(clusters) + len(probes) * 2
    return Load(services, probes, homes, args.shards)


async def converge(
    client: AsyncClient, replicas: Sequence[Replica], load: Load, args: argparse.Namespace
) -> float:
    """Seconds until every home is polled by one replica, has a ceiling (the windows of a
    new set start over) and no TrafficMap changed for `--quiet-seconds`."""
    started = time.monotonic()
    while True:
        scraped = [await r.scrape() for r in replicas]
        held = sum(s.get("ome_routing_observed_homes", 0) for s in scraped)
        fallback = sum(s.get("ome_trafficmap_capacity_fallback_homes", 0) for s in scraped)
        if held == load.homes and fallback == 0:
            break
        if time.monotonic() - started > args.converge_limit:
            raise SystemExit(f"{held}/{load.homes} homes held, {fallback} without a ceiling")
        for replica in replicas:
            if not replica.alive:
                raise replica.exited()
        await asyncio.sleep(0.5)
    await wait_for_rest(client, args.converge_limit, args.quiet_seconds)
    return time.monotonic() - started


# -- steady state -----------------------------------------------------------------------


async def steady(
    client: AsyncClient,
    plane: LocalControlPlane,
    replicas: Sequence[Replica],
    seconds: float,
    sharded: bool = True,
) -> dict[str, Any]:
    """CPU (of a core) and resident memory of each replica, the API server and etcd,
    over `seconds` at rest, with each replica's polls, homes and shards."""
    pids = {r.identity: r.process.pid for r in replicas}
    server = {name: pid for name, pid in plane.pids.items() if name in ("kube-apiserver", "etcd")}
    before = [await r.scrape() for r in replicas]
    sleeps0 = {name: sleeps(pid) for name, pid in pids.items()}
    cpu0 = {name: cpu_seconds(pid) for name, pid in {**pids, **server}.items()}
    t0 = time.monotonic()
    leases = await lease_writes(client, CONTROLLER_NAMESPACE, seconds)
    elapsed = time.monotonic() - t0
    cpu = {
        name: (cpu_seconds(pid) - cpu0[name]) / elapsed for name, pid in {**pids, **server}.items()
    }
    wake_ups = {name: (sleeps(pid) - sleeps0[name]) / elapsed for name, pid in pids.items()}
    after = [await r.scrape() for r in replicas]
    per_replica = []
    for replica, b, a in zip(replicas, before, after, strict=True):
        per_replica.append(
            {
                "identity": replica.identity,
                "cpu": cpu[replica.identity],
                "wake_ups_per_second": wake_ups[replica.identity],
                "rss_mib": rss_bytes(replica.process.pid) / 2**20,
                "homes": a.get("ome_routing_observed_homes", 0),
                "shards": a.get("ome_routing_shards_held") if sharded else None,
                "polls_per_second": (
                    a.get("ome_routing_capacity_polls_total", 0)
                    - b.get("ome_routing_capacity_polls_total", 0)
                )
                / elapsed,
                "map_writes": a.get("ome_routing_trafficmap_writes_total", 0)
                - b.get("ome_routing_trafficmap_writes_total", 0),
            }
        )
    return {
        "replicas": per_replica,
        "server_cpu": {name: round(cpu[name], 3) for name in server},
        "lease_writes_per_second": leases / elapsed,
    }


def sleeps(pid: int) -> int:
    """How often the process's main thread, which runs the event loop, has gone to sleep
    (`voluntary_ctxt_switches` in `/proc/<pid>/status`): its wake-ups, near enough."""
    return status_field(pid, "voluntary_ctxt_switches")


# -- changes of membership --------------------------------------------------------------


def moved(before: dict[int, str | None], after: dict[int, str | None]) -> set[int]:
    return {s for s in before if before[s] != after.get(s)}


async def transition(
    label: str,
    change: Callable[[], Awaitable[None]],
    members_after: Sequence[str],
    watch: ShardWatch,
    load: Load,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Shards and keys that change hands when `change` runs, against what `assign`
    predicts from the holders before."""
    before = dict(watch.holders)
    watch.reset()
    started = time.monotonic()
    await change()
    as_assigned = await watch.settle(
        members_after, args.timing.lease + 4 * args.timing.retry + 10, 3 * args.timing.retry
    )
    settled = time.monotonic() - started
    after = dict(watch.holders)
    shards = moved(before, after)
    predicted = moved(before, dict(assign(load.shards, members_after, before)))
    keys = load.keys_in(shards)
    figure = {
        "transition": label,
        "shards_moved": len(shards),
        "shards": load.shards,
        "keys_moved": len(keys),
        "keys": len(load.keys),
        "assign_predicts_shards": len(predicted),
        "settled_seconds": round(settled, 1),
        "settled_as_assign_places": as_assigned,
        "longest_unowned_seconds": round(watch.longest_unowned, 1),
        "unowned_bound_seconds": args.timing.unowned_bound,
    }
    log(
        f"{label}: {len(shards)}/{load.shards} shards and {len(keys)}/{len(load.keys)} keys "
        f"moved (assign: {len(predicted)} shards), settled in {settled:.1f}s, longest "
        f"unowned {watch.longest_unowned:.1f}s"
    )
    return figure


async def failover(
    client: AsyncClient,
    replicas: list[Replica],
    victim: Replica,
    watch: ShardWatch,
    trials: ChangeTrials,
    load: Load,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """SIGKILL `victim`: its shards and maps taken over; the others' services meanwhile."""
    survivors = [r for r in replicas if r is not victim]
    owners = dict(watch.holders)
    lost_shards = {s for s, holder in owners.items() if holder == victim.identity}
    lost_keys = set(load.keys_in(lost_shards))
    # the services of the chart poll (quorum 2 or more): a new owner's first poll leaves
    # them without a ceiling, so their window's start shows in the map
    timed = lost_keys & set(load.services)
    kept_probes = [k for k in load.probes if k not in lost_keys]
    reference = [await trials.trial(name) for _ns, name in kept_probes[: args.trials]]
    ceilings = Ceilings(client)
    await ceilings.start()
    log(f"SIGKILL {victim.identity}: {len(lost_shards)} shards, {len(lost_keys)} services")
    watch.reset()
    killed = time.monotonic()
    victim.process.kill()
    victim.process.wait()
    period = parse_duration(args.period).seconds
    limit = args.timing.unowned_bound + (args.quorum + 2) * period + 30

    async def held_again() -> float:
        while True:
            if all(watch.holders.get(s) not in (None, victim.identity) for s in lost_shards):
                return time.monotonic() - killed
            if time.monotonic() - killed > limit:
                raise SystemExit(f"{victim.identity}'s shards not held again in {limit:.0f}s")
            await watch.next_change(1.0)

    async def fresh() -> float:
        # a map the new holder first writes after `quorum` polls (or not at all: the same
        # weights) never shows a home without a ceiling: once every shard is held again,
        # `quorum` + 2 periods later such a map is counted as having kept its ceiling
        while not timed <= ceilings.fresh_at.keys():
            now = time.monotonic() - killed
            if now > limit:
                break
            settled = held_task.done() and now > held_task.result() + (args.quorum + 2) * period
            if settled and not {k for k in timed if k in ceilings.lost_at} - set(ceilings.fresh_at):
                break
            await asyncio.sleep(0.1)
        return time.monotonic() - killed

    held_task = asyncio.create_task(held_again())
    fresh_task = asyncio.create_task(fresh())
    during: list[tuple[tuple[str, str], float]] = []
    while not fresh_task.done() and kept_probes:
        key = kept_probes[len(during) % len(kept_probes)]
        during.append((key, await trials.trial(key[1])))
    held = await held_task
    await fresh_task
    # the survivors keep their shards (sticky assignment): this counts any that moved
    members = [r.identity for r in survivors]
    await watch.settle(members, args.timing.unowned_bound + 10, 3 * args.timing.retry)
    ceilings.stop()
    between = {s for s, holder in owners.items() if holder != victim.identity} & moved(
        owners, dict(watch.holders)
    )
    moved_keys = set(load.keys_in(between))
    fresh_times = [ceilings.fresh_at[k] - killed for k in timed if k in ceilings.fresh_at]
    # the window's share: from the shard's new holder to the fresh ceiling
    window_times = [
        ceilings.fresh_at[k] - watch.since[load.shard_of(k)]
        for k in timed
        if k in ceilings.fresh_at and load.shard_of(k) in watch.since
    ]
    kept_lost = [k for k in ceilings.lost_at if k not in lost_keys | moved_keys]
    steady_trials = [t for key, t in during if key not in moved_keys]
    figure = {
        "killed": victim.identity,
        "shards_lost": len(lost_shards),
        "services_lost": len(lost_keys),
        "held_again_seconds": round(held, 1),
        "longest_unowned_seconds": round(watch.longest_unowned, 1),
        "unowned_bound_seconds": args.timing.unowned_bound,
        "fresh_ceiling_p50_seconds": round(statistics.median(fresh_times), 1)
        if fresh_times
        else None,
        "fresh_ceiling_all_seconds": round(max(fresh_times), 1) if fresh_times else None,
        "fresh_after_taken_p50_seconds": round(statistics.median(window_times), 1)
        if window_times
        else None,
        "fresh_after_taken_max_seconds": round(max(window_times), 1) if window_times else None,
        "services_timed": len(timed),
        # lost its ceiling and never had it back within the limit: a failure
        "services_without_a_fresh_ceiling": len(
            {k for k in timed if k in ceilings.lost_at} - ceilings.fresh_at.keys()
        ),
        # never without a ceiling: the new holder's first write came after `quorum` polls
        "services_that_kept_their_ceiling": len({k for k in timed if k not in ceilings.lost_at}),
        "target_seconds": args.timing.lease + args.quorum * period,
        "quorum_periods_seconds": args.quorum * period,
        "shards_moved_between_others": len(between),
        "services_moved_between_others": len(moved_keys),
        "others_services_that_lost_a_ceiling": len(kept_lost),
        "others_change_to_write_before_p50_ms": _ms(statistics.median(reference))
        if reference
        else None,
        "others_change_to_write_during_trials": len(steady_trials),
        "others_change_to_write_during_p50_ms": _ms(statistics.median(steady_trials))
        if steady_trials
        else None,
        "others_change_to_write_during_max_ms": _ms(max(steady_trials)) if steady_trials else None,
        "others_change_to_write_during_ms": [_ms(t) for t in steady_trials],
        "others_change_to_write_before_ms": [_ms(t) for t in reference],
        "survivors": members,
    }
    log(
        f"failover: shards held again after {held:.1f}s, every map fresh after "
        f"{figure['fresh_ceiling_all_seconds']}s; {len(between)} shards moved between the "
        f"others; the others' changes during it: {len(steady_trials)} trials, max "
        f"{figure['others_change_to_write_during_max_ms']} ms; {len(kept_lost)} of their "
        "maps that did not move lost a ceiling"
    )
    return figure


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 0)


# -- the run ----------------------------------------------------------------------------


async def run_set(
    client: AsyncClient,
    plane: LocalControlPlane,
    workdir: Path,
    load: Load,
    args: argparse.Namespace,
    watch: ShardWatch,
    count: int,
) -> tuple[list[Replica], dict[str, Any]]:
    """`count` sharded replicas started together; at rest, their steady window."""
    identities = [f"replica-{i + 1}" for i in range(count)]
    started = time.monotonic()
    replicas = [await start_replica(workdir, plane, i, args, sharded=True) for i in identities]
    await watch.settle(identities, args.converge_limit, 3 * args.timing.retry)
    converged = await converge(client, replicas, load, args)
    log(f"{count} sharded: at rest {time.monotonic() - started:.1f}s after starting")
    figures = await steady(client, plane, replicas, args.steady_seconds)
    figures["converge_seconds"] = round(converged, 1)
    return replicas, figures


def bench_client(plane: LocalControlPlane) -> AsyncClient:
    """The bench's own client of the local control plane (its writes' field manager `bench`)."""
    return AsyncClient(
        KubeConfig.from_file(plane.kubeconfig),
        trust_env=False,
        field_manager="bench",
        timeout=httpx2.Timeout(120.0),
    )


def write_chart_values(workdir: Path, args: argparse.Namespace) -> None:
    """The values file of the run's controllers: routing on, the chart poll of `--period`
    and `--quorum`."""
    routing = {"enabled": True, "capacity": chart_poll(parse_duration(args.period), args.quorum)}
    write_values(workdir, routing)


async def main_async(
    args: argparse.Namespace, plane: LocalControlPlane, endpoint: str, workdir: Path
) -> dict[str, Any]:
    client = bench_client(plane)
    reporter = ChangingReporter()
    await reporter.start()
    write_chart_values(workdir, args)
    figures: dict[str, Any] = {
        "services": args.services,
        "homes_per_service": args.homes,
        "probe_services": args.probes,
        "period": args.period,
        "quorum": args.quorum,
        "shards": args.shards,
        "lease": [args.timing.lease, args.timing.renew, args.timing.retry],
    }
    running: list[Replica] = []
    watch = ShardWatch(client, CONTROLLER_NAMESPACE, GROUP, args.shards)
    try:
        # 1. the single leader, idle, then with the load
        leader = await start_replica(workdir, plane, "leader", args, sharded=False)
        running.append(leader)
        await asyncio.sleep(2)
        figures["idle_rss_mib"] = rss_bytes(leader.process.pid) / 2**20
        started = time.monotonic()
        load = await create_load(client, args, endpoint, reporter)
        log(
            f"created {len(load.keys)} services ({load.homes} homes) in {time.monotonic() - started:.1f}s"
        )
        figures["leader_converge_seconds"] = round(await converge(client, [leader], load, args), 1)
        figures["leader_before_load"] = await steady(
            client, plane, [leader], args.steady_seconds, sharded=False
        )
        await leader.stop()
        running.clear()
        # the reference: a leader started over the services, as every sharded set is (one
        # started before them, as above, ends with less resident memory for the same work)
        leader = await start_replica(workdir, plane, "leader-2", args, sharded=False)
        running.append(leader)
        await converge(client, [leader], load, args)
        figures["leader"] = await steady(
            client, plane, [leader], args.steady_seconds, sharded=False
        )
        await leader.stop()
        running.clear()

        # 2. sharded, 1, 2 and 3 replicas
        await watch.start()
        figures["sharded"] = {}
        for count in range(1, 4):
            replicas, figures["sharded"][count] = await run_set(
                client, plane, workdir, load, args, watch, count
            )
            running.extend(replicas)
            if count < 3:
                for replica in replicas:
                    await replica.stop()
                running.clear()

        # 3. membership changes, from 3 replicas
        trials = ChangeTrials(client, reporter, PROBES_NAMESPACE, CLUSTERS[:2])
        await trials.start()
        transitions = []

        def identities() -> list[str]:
            return [r.identity for r in running if r.alive]

        async def add(identity: str) -> None:
            running.append(await start_replica(workdir, plane, identity, args, sharded=True))

        async def remove(identity: str) -> None:
            replica = next(r for r in running if r.identity == identity)
            await replica.stop()
            running.remove(replica)

        steps = (
            ("3 -> 4", "replica-4", True),
            ("4 -> 3", "replica-4", False),
            ("3 -> 2", "replica-3", False),
            ("2 -> 3", "replica-3", True),
        )
        for label, identity, adding in steps:
            members = identities()
            if adding:
                after = [*members, identity]
                change = functools.partial(add, identity)
            else:
                after = [m for m in members if m != identity]
                change = functools.partial(remove, identity)
            transitions.append(await transition(label, change, after, watch, load, args))
        figures["transitions"] = transitions

        # 4. SIGKILL one of 3, at rest (the trials before it are the reference)
        figures["at_rest_before_kill_seconds"] = round(
            await converge(client, running, load, args), 1
        )
        victim = next(r for r in running if r.identity == "replica-2")
        figures["failover"] = await failover(client, running, victim, watch, trials, load, args)
        running.remove(victim)
        trials.stop()
        figures["load_average"] = os.getloadavg()
        return figures
    finally:
        watch.stop()
        for replica in running:
            await replica.stop()
        await reporter.stop()
        await client.close()


# -- the table --------------------------------------------------------------------------


def ratio(value: float, reference: float) -> str:
    return f"{value / reference:.2f}" if reference > 0 else "-"


def table(figures: dict[str, Any]) -> str:
    """The figures as Markdown tables, each replica's cost against the leader's over N."""
    leader = figures["leader"]["replicas"][0]
    idle = figures["idle_rss_mib"]
    lines = [
        f"{figures['services']} services x {figures['homes_per_service']} homes "
        f"(+{figures['probe_services']} fast-poll services), period {figures['period']}, "
        f"quorum {figures['quorum']}, {figures['shards']} shards, Lease "
        + "/".join(f"{s:g}s" for s in figures["lease"]),
        "",
        "| set | replica | homes | shards | polls/s | CPU (cores) | CPU / (leader's / N) "
        "| wake-ups/s | RSS MiB | RSS / (leader's / N) | RSS above idle / (leader's / N) "
        "| API server + etcd CPU | Lease writes/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def rows(name: str, data: dict[str, Any], n: int) -> None:
        server = sum(data["server_cpu"].values())
        for r in data["replicas"]:
            shards = "-" if r["shards"] is None else f"{r['shards']:.0f}"
            lines.append(
                f"| {name} | {r['identity']} | {r['homes']:.0f} | {shards} "
                f"| {r['polls_per_second']:.0f} | {r['cpu']:.3f} "
                f"| {ratio(r['cpu'], leader['cpu'] / n)} "
                f"| {r['wake_ups_per_second']:.0f} | {r['rss_mib']:.1f} "
                f"| {ratio(r['rss_mib'], leader['rss_mib'] / n)} "
                f"| {ratio(r['rss_mib'] - idle, (leader['rss_mib'] - idle) / n)} "
                f"| {server:.3f} | {data['lease_writes_per_second']:.1f} |"
            )

    if "leader_before_load" in figures:
        rows("single leader, started before the services", figures["leader_before_load"], 1)
    rows("single leader", figures["leader"], 1)
    for count, data in figures["sharded"].items():
        rows(f"sharded x{count}", data, int(count))
    lines += [
        "",
        "| change | shards moved | keys moved | assign predicts | settled (s) "
        "| longest unowned (s), bound |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for t in figures["transitions"]:
        lines.append(
            f"| {t['transition']} | {t['shards_moved']}/{t['shards']} "
            f"({t['shards_moved'] / t['shards']:.2f}) | {t['keys_moved']}/{t['keys']} "
            f"({t['keys_moved'] / t['keys']:.2f}) | {t['assign_predicts_shards']} "
            f"| {t['settled_seconds']}{'' if t['settled_as_assign_places'] else ' (not as assign)'} "
            f"| {t['longest_unowned_seconds']}, {t['unowned_bound_seconds']:g} |"
        )
    f = figures["failover"]
    lines += [
        "",
        "| SIGKILL one of 3 | value |",
        "| --- | --- |",
        f"| its shards, services (timed) | {f['shards_lost']}, {f['services_lost']} "
        f"({f['services_timed']}) |",
        f"| every shard held again (its Lease unowned at most; bound) "
        f"| {f['held_again_seconds']} s ({f['longest_unowned_seconds']} s; "
        f"{f['unowned_bound_seconds']:g} s) |",
        f"| every map with a fresh ceiling (p50, all; target {f['target_seconds']:g} s) "
        f"| {f['fresh_ceiling_p50_seconds']}, {f['fresh_ceiling_all_seconds']} s"
        f" ({f.get('services_that_kept_their_ceiling', 0)} kept theirs throughout, "
        f"{f['services_without_a_fresh_ceiling']} without) |",
        f"| the same from the shard's new holder (p50, max; bound {f['quorum_periods_seconds']:g} s) "
        f"| {f['fresh_after_taken_p50_seconds']}, {f['fresh_after_taken_max_seconds']} s |",
        f"| the others' change to write, before / during, not moved (p50, max; trials) "
        f"| {f['others_change_to_write_before_p50_ms']} / "
        f"{f['others_change_to_write_during_p50_ms']}, "
        f"{f['others_change_to_write_during_max_ms']} ms; "
        f"{f['others_change_to_write_during_trials']} |",
        f"| shards (services) moved between the others | {f['shards_moved_between_others']} "
        f"({f['services_moved_between_others']}) |",
        f"| the others' maps not moved that lost a ceiling "
        f"| {f['others_services_that_lost_a_ceiling']} |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=600)
    parser.add_argument("--homes", type=int, default=2, choices=range(1, len(CLUSTERS) + 1))
    parser.add_argument(
        "--probes", type=int, default=12, help="services with a fast poll, for change trials"
    )
    parser.add_argument("--period", default="5s", help="the services' poll period")
    parser.add_argument("--quorum", type=int, default=2)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument(
        "--lease",
        dest="timing",
        type=Timing.parse,
        default=Timing(15.0, 10.0, 2.0),
        help="lease duration, renew deadline and retry period (15s,10s,2s: client-go's)",
    )
    parser.add_argument("--steady-seconds", type=float, default=45)
    parser.add_argument(
        "--trials", type=int, default=5, help="change trials on the others' services before a kill"
    )
    parser.add_argument("--quiet-seconds", type=float, default=10)
    parser.add_argument("--converge-limit", type=float, default=300)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the replicas' logs and values file here (default: a temporary directory)",
    )
    args = parser.parse_args()
    tools = ensure_tools(progress=log)
    started = time.monotonic()
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    with (
        contextlib.nullcontext(str(args.workdir))
        if args.workdir is not None
        else tempfile.TemporaryDirectory(prefix="sharding-bench-") as tmp,
        LocalControlPlane(tools=tools) as plane,
        nginx_reporter("~ /capacity$") as endpoint,
    ):
        figures = asyncio.run(main_async(args, plane, endpoint, Path(tmp)))
    figures["run_seconds"] = round(time.monotonic() - started)
    figures["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(json.dumps(figures, indent=2, default=str))
    print()
    print(table(figures))


if __name__ == "__main__":
    main()
