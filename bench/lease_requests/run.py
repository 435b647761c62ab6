"""What a sharded replica's Leases cost it: a renewal, and a renewal of another replica heard.

On the local control plane, `--shards` shard Leases, renewed as `kube.sharding.ShardSet`
renews the ones a replica holds: each turn, `replace` of each held Lease through
lightkube's `AsyncClient`, at most `CONCURRENT_REQUESTS` at once. In one run:

1. **A poll** (the reference): the observer polling `--homes` homes on nginx on loopback
   (`bench/nginx_reporter.py`) at the rate of a replica of `--replicas` at 10,000
   services, from this checkout's source as the sharding bench's replicas run; CPU
   seconds of this process per poll.
2. **A renewal**: `--replicas` sets of Leases (each a replica's share plus its member
   Lease), each set renewed in one turn, one set after another, a turn every
   `--turn` seconds; CPU seconds of this process per renewal. Twice: on the replica's
   own transport (`kube.lease_wire.LeaseWire`, how `ShardSet` renews), and through
   lightkube's `replace` (how it renewed before, and still does where its kubeconfig
   keeps the wire off).
3. **A renewal heard**: meanwhile a fresh process watches the group's Leases through
   `kube.watching.Informer` and reads each as `ShardSet` does (`Lease.from_dict`), as
   every replica does; its CPU seconds per event, less what it spends idle.

Then what a replica of `--replicas` spends on its Leases at client-go's timing (a turn
every 2 to 4.4 s: 3.2 s on average) and at the chart's (8 to 17.6 s): it renews its share
and its member Lease each turn, and hears every replica's; with the renewals on the wire,
and through lightkube's client.

Not a test: the figures depend on the machine. Usage: python bench/lease_requests/run.py
[--shards 64] [--replicas 3] [--turns 20]. In seconds, for a check that it runs
(`tests/bench`): --shards 8 --turns 2 --turn 0.5 --poll-seconds 1 --homes 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from lightkube import AsyncClient, KubeConfig
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "poll_throughput"))
from controller_scale.run import cpu_seconds
from nginx_reporter import nginx_reporter
from poll_throughput.run import Collections, observe

from ome_routing.kube.leader import JITTER_FACTOR
from ome_routing.kube.lease_wire import LeaseWire
from ome_routing.kube.sharding import CONCURRENT_REQUESTS
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools

NAMESPACE = "default"
GROUP = "bench-leases"
#: a replica's polls a second at 10,000 services x 2 homes, period 5 s, 3 replicas
REPLICA_POLLS_PER_SECOND = 1333.0

#: the process that hears the Leases: an `Informer` of the group's Leases, each event read
#: as `ShardSet._seen` reads it; it prints how many it heard when it gets a line on stdin
LISTENER = r"""
import asyncio, sys
import uvloop
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.coordination_v1 import Lease
from ome_routing.kube.watching import Informer

async def main() -> None:
    client = AsyncClient(config=KubeConfig.from_file(sys.argv[1]).get(), field_manager="bench")
    heard = 0
    def seen(key, old, new):
        nonlocal heard
        if new is not None:
            Lease.from_dict(new)
            heard += 1
    informer = Informer(
        client, Lease, seen, namespaced=True, namespace=sys.argv[2], labels={"group": sys.argv[3]}
    )
    task = asyncio.ensure_future(informer.run())
    await informer.synced.wait()
    print("synced", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        print(heard, flush=True)
    task.cancel()

uvloop.run(main())
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def lease(name: str, shard: int | None) -> Lease:
    now = datetime.now(UTC)
    labels = {"group": GROUP, "role": "member" if shard is None else "shard"}
    if shard is not None:
        labels["shard"] = str(shard)
    return Lease(
        metadata=ObjectMeta(name=name, namespace=NAMESPACE, labels=labels),
        spec=LeaseSpec(
            holderIdentity="bench",
            leaseDurationSeconds=15,
            acquireTime=now,
            renewTime=now,
            leaseTransitions=0,
        ),
    )


async def poll_cost(endpoint: str, homes: int, seconds: float) -> tuple[float, float]:
    """CPU seconds a poll, and polls a second, of the observer at a replica's rate."""
    period = homes / REPLICA_POLLS_PER_SECOND
    _, rate, per_thousand = await observe(
        endpoint, homes, period, 256, seconds, period + 1.0, False, Collections()
    )
    return per_thousand / 1000, rate


async def renewal_cost(
    replace: Callable[[Lease], Awaitable[Lease]], sets: list[list[Lease]], turns: int, turn: float
) -> tuple[float, int]:
    """CPU seconds a renewal, and renewals: each set renewed in one turn as a replica's,
    each Lease written with `replace`."""
    requests = asyncio.Semaphore(CONCURRENT_REQUESTS)

    async def renew(held: list[Lease], i: int) -> None:
        async with requests:
            spec = held[i].spec
            assert spec is not None
            spec.renewTime = datetime.now(UTC)
            held[i] = await replace(held[i])

    renewed = 0
    cpu0 = time.process_time()
    for _ in range(turns):
        started = time.monotonic()
        for held in sets:
            await asyncio.gather(*(renew(held, i) for i in range(len(held))))
            renewed += len(held)
            await asyncio.sleep(turn / (2 * len(sets)))  # the replicas' turns apart
        await asyncio.sleep(max(0.0, turn - (time.monotonic() - started)))
    return (time.process_time() - cpu0) / renewed, renewed


async def measure(args: argparse.Namespace, plane: LocalControlPlane, endpoint: str) -> dict:
    client = AsyncClient(config=KubeConfig.from_file(plane.kubeconfig).get(), field_manager="bench")
    share = [list(range(r, args.shards, args.replicas)) for r in range(args.replicas)]
    sets = []
    for r, shards in enumerate(share):
        held = [await client.create(lease(f"{GROUP}-shard-{s}", s)) for s in shards]
        held.append(await client.create(lease(f"{GROUP}-member-{r}", None)))
        sets.append(held)
    log(f"{sum(map(len, sets))} Leases; the reference: polls at a replica's rate")
    poll, poll_rate = await poll_cost(endpoint, args.homes, args.poll_seconds)

    listener = subprocess.Popen(
        [sys.executable, "-c", LISTENER, str(plane.kubeconfig), NAMESPACE, GROUP],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert listener.stdin is not None and listener.stdout is not None

    def heard() -> int:
        listener.stdin.write("\n")
        listener.stdin.flush()
        return int(listener.stdout.readline())

    try:
        assert listener.stdout.readline().strip() == "synced"
        idle0, t_idle = cpu_seconds(listener.pid), time.monotonic()
        await asyncio.sleep(args.idle_seconds)
        idle = (cpu_seconds(listener.pid) - idle0) / (time.monotonic() - t_idle)
        wire, why = LeaseWire.of(client)
        assert wire is not None, why
        log(f"renewals: {args.turns} turns of {args.replicas} replicas, on the wire")
        heard0, cpu0, t0 = heard(), cpu_seconds(listener.pid), time.monotonic()
        try:
            renewal, renewed = await renewal_cost(wire.replace, sets, args.turns, args.turn)
        finally:
            wire.close()
        log(f"renewals: {args.turns} turns of {args.replicas} replicas, through lightkube")
        client_renewal, client_renewed = await renewal_cost(
            client.replace, sets, args.turns, args.turn
        )
        await asyncio.sleep(1.0)  # the last events reach the listener
        events = heard() - heard0
        listened = cpu_seconds(listener.pid) - cpu0 - idle * (time.monotonic() - t0)
    finally:
        listener.kill()
        listener.wait()
    hearing = max(listened, 0.0) / max(events, 1)  # a few events: under the clock tick
    figures = {
        "shards": args.shards,
        "replicas": args.replicas,
        "poll_ms": poll * 1000,
        "polls_per_second": poll_rate,
        "renewal_ms": renewal * 1000,
        "renewals": renewed,
        "client_renewal_ms": client_renewal * 1000,
        "client_renewals": client_renewed,
        "heard_ms": hearing * 1000,
        "heard": events,
        "listener_idle_cores": idle,
        "timings": {},
    }
    for name, retry in (("client-go's, 15s/10s/2s", 2.0), ("the chart's, 60s/40s/8s", 8.0)):
        mean_turn = retry * (1 + JITTER_FACTOR / 2)
        renewals = (args.shards / args.replicas + 1) / mean_turn
        heard_rate = (args.shards + args.replicas) / mean_turn
        figures["timings"][name] = {
            "renewals_per_second": renewals,
            "heard_per_second": heard_rate,
            "cores": renewals * renewal + heard_rate * hearing,
            "client_cores": renewals * client_renewal + heard_rate * hearing,
        }
    return figures


def table(f: dict) -> str:
    poll = f["poll_ms"]
    lines = [
        f"{f['shards']} shard Leases, {f['replicas']} replicas; the reference: a poll, "
        f"{poll:.3f} ms of CPU at {f['polls_per_second']:.0f} polls a second",
        "",
        "| request | CPU (ms) | in polls | measured |",
        "| --- | --- | --- | --- |",
        f"| a poll (the reference) | {poll:.3f} | 1.0 | {f['polls_per_second']:.0f}/s |",
        f"| a renewal on the wire (`LeaseWire.replace`) | {f['renewal_ms']:.3f} "
        f"| {f['renewal_ms'] / poll:.1f} | {f['renewals']} |",
        f"| a renewal through lightkube (`replace`) | {f['client_renewal_ms']:.3f} "
        f"| {f['client_renewal_ms'] / poll:.1f} | {f['client_renewals']} |",
        f"| a renewal heard (watch event) | {f['heard_ms']:.3f} | {f['heard_ms'] / poll:.1f} "
        f"| {f['heard']} |",
        "",
        "| timing | a replica's renewals/s | renewals heard/s | its Leases' CPU (cores) "
        "| in polls/s | through lightkube (cores) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, t in f["timings"].items():
        lines.append(
            f"| {name} | {t['renewals_per_second']:.1f} | {t['heard_per_second']:.1f} "
            f"| {t['cores']:.4f} | {t['cores'] * 1000 / poll:.0f} | {t['client_cores']:.4f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--turns", type=int, default=20, help="turns of every replica's renewals")
    parser.add_argument("--turn", type=float, default=2.0, help="seconds between two turns")
    parser.add_argument("--homes", type=int, default=2000, help="homes of the reference's polls")
    parser.add_argument("--poll-seconds", type=float, default=20.0)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    args = parser.parse_args()
    if args.replicas < 1 or args.shards < args.replicas:
        parser.error("--replicas must be at least 1 and at most --shards")
    tools = ensure_tools(progress=log)
    with LocalControlPlane(tools=tools) as plane, nginx_reporter("~ /capacity$") as endpoint:
        import uvloop

        figures = uvloop.run(measure(args, plane, endpoint))
    figures["load_average"] = os.getloadavg()
    figures["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(json.dumps(figures, indent=2))
    print()
    print(table(figures))


if __name__ == "__main__":
    main()
