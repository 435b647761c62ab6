"""A sharded replica of N against a single leader of 1/N of the services, in one run.

`run.py` compares each of N sharded replicas with 1/N of the single leader over all the
services. This asks what part of the difference is sharding's: on the local control
plane, `--services` routed InferenceServices (`--homes` homes each, answered by nginx on
loopback, as in `run.py`), then, each at rest (every home polled, with a ceiling, no
TrafficMap changed for `--quiet-seconds`) and measured over a steady window of
`--steady-seconds` (`run.steady`):

1. **the single leader over every service**, as in `run.py`;
2. **N sharded replicas** (`--replicas`, 3 by default) over the same services, started
   together once the leader has stopped;
3. **the single leader over every service again**, started afresh: the machine's speed
   drifts by a tenth or more over minutes, so the reference is the mean of the leader's
   two windows, one before and one after the replicas';
4. **the single leader over 1/N of the services**: every service but each N-th deleted
   (the leader started after, over the rest, reaps their maps first), started afresh.

For each process: its CPU (of a core), against 1/N of the reference and per poll
against the reference's; its wake-ups a second; its resident memory; and the API
server's and etcd's CPU over the same window. A replica against the leader of 1/N is
what sharding itself costs (its Leases, heard and renewed, and a cache of every
service); the leader of 1/N against 1/N of the reference is what a process doing 1/N
of the work costs beyond 1/N.

Not a test: the figures depend on the machine. Usage: python bench/sharding/share.py
[--services 10000] [--replicas 3] [--homes 2] [--period 5s] [--shards 64]. In seconds,
for a check that it runs (`tests/bench`): --services 6 --shards 8 --period 2s
--steady-seconds 1 --quiet-seconds 1 --lease 8s,6s,1s
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as sharding  # this folder's run.py, after the path

from ome_routing.kube.resources import InferenceService
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools


def kept(load: sharding.Load, replicas: int, homes: int) -> sharding.Load:
    """The load with every `replicas`-th service only (and every fast-poll one)."""
    services = load.services[::replicas]
    return sharding.Load(
        services, load.probes, len(services) * homes + len(load.probes) * 2, load.shards
    )


async def main_async(
    args: argparse.Namespace, plane: LocalControlPlane, endpoint: str, workdir: Path
) -> dict[str, Any]:
    client = sharding.bench_client(plane)
    reporter = sharding.ChangingReporter()
    await reporter.start()
    sharding.write_chart_values(workdir, args)
    figures: dict[str, Any] = {
        "services": args.services,
        "homes_per_service": args.homes,
        "replicas": args.replicas,
        "period": args.period,
        "shards": args.shards,
        "lease": [args.timing.lease, args.timing.renew, args.timing.retry],
    }
    running: list[sharding.Replica] = []
    watch = sharding.ShardWatch(client, sharding.CONTROLLER_NAMESPACE, sharding.GROUP, args.shards)
    try:
        load = await sharding.create_load(client, args, endpoint, reporter)

        async def leader(identity: str, over: sharding.Load) -> dict[str, Any]:
            process = await sharding.start_replica(workdir, plane, identity, args, sharded=False)
            running.append(process)
            await sharding.converge(client, [process], over, args)
            measured = await sharding.steady(
                client, plane, [process], args.steady_seconds, sharded=False
            )
            await process.stop()
            running.clear()
            return measured

        figures["leader"] = await leader("leader", load)
        await watch.start()
        replicas, figures["sharded"] = await sharding.run_set(
            client, plane, workdir, load, args, watch, args.replicas
        )
        running.extend(replicas)
        for replica in replicas:
            await replica.stop()
        running.clear()
        # the machine's speed drifts over minutes: the leader again, after the replicas
        figures["leader_after"] = await leader("leader-after", load)
        third = kept(load, args.replicas, args.homes)
        gone = set(load.services) - set(third.services)
        await sharding.bounded(
            [client.delete(InferenceService, name, namespace=ns) for ns, name in sorted(gone)]
        )
        sharding.log(f"deleted {len(gone)} services, {len(third.services)} kept")
        figures["leader_of_share"] = await leader("leader-share", third)
        return figures
    finally:
        watch.stop()
        for process in running:
            await process.stop()
        await reporter.stop()
        await client.close()


def table(figures: dict[str, Any]) -> str:
    n = figures["replicas"]
    # the reference: the mean of the leader's two windows, before and after the replicas
    leaders = [figures[k]["replicas"][0] for k in ("leader", "leader_after")]
    cpu = statistics.fmean(p["cpu"] for p in leaders)
    share = cpu / n
    polls = statistics.fmean(p["polls_per_second"] for p in leaders)
    per_poll = cpu / polls if polls >= 1 else 0.0
    rows = [
        "| process | homes | polls/s | CPU (cores) | CPU / (leader's / N) | CPU a poll / leader's"
        " | wake-ups/s | RSS MiB | API server + etcd CPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    sets = (
        ("the leader, every service", figures["leader"]),
        (f"sharded x{n}", figures["sharded"]),
        ("the leader, every service, again", figures["leader_after"]),
        (f"the leader, 1/{n} of the services", figures["leader_of_share"]),
    )
    for label, measured in sets:
        server = sum(measured["server_cpu"].values())
        for process in measured["replicas"]:
            polls = process["polls_per_second"]
            per_poll_ratio = (
                f"{process['cpu'] / polls / per_poll:.2f}" if polls >= 1 and per_poll else "-"
            )
            of_share = f"{process['cpu'] / share:.2f}" if share else "-"
            rows.append(
                f"| {label}: {process['identity']} | {process['homes']:.0f} | {polls:,.0f}"
                f" | {process['cpu']:.4f} | {of_share}"
                f" | {per_poll_ratio}"
                f" | {process['wake_ups_per_second']:.0f} | {process['rss_mib']:.1f}"
                f" | {server:.3f} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=600)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument(
        "--homes", type=int, default=2, choices=range(1, len(sharding.CLUSTERS) + 1)
    )
    parser.add_argument("--period", default="5s", help="the services' poll period")
    parser.add_argument("--quorum", type=int, default=2)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument(
        "--lease",
        dest="timing",
        type=sharding.Timing.parse,
        default=sharding.Timing(15.0, 10.0, 2.0),
        help="lease duration, renew deadline and retry period (15s,10s,2s: client-go's)",
    )
    parser.add_argument("--steady-seconds", type=float, default=45)
    parser.add_argument("--quiet-seconds", type=float, default=10)
    parser.add_argument("--converge-limit", type=float, default=900)
    args = parser.parse_args()
    args.probes = 0  # no change trials here
    tools = ensure_tools(progress=sharding.log)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="shard-share-bench-") as tmp,
        LocalControlPlane(tools=tools) as plane,
        sharding.nginx_reporter("~ /capacity$") as endpoint,
    ):
        figures = asyncio.run(main_async(args, plane, endpoint, Path(tmp)))
    figures["run_seconds"] = round(time.monotonic() - started)
    print(json.dumps(figures, indent=2, default=str))
    print()
    print(table(figures))


if __name__ == "__main__":
    main()
