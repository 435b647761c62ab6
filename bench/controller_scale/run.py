"""Controller at scale: 1,000 routed InferenceServices x 3 homes on a local control plane.

Polls go to nginx on loopback (Debian `nginx-light`), one location answering every home
with a fresh report. Measured in one run:

- convergence: time from creating the services to every home having a ceiling;
- change latency: a reporter's new count to the TrafficMap write that shows it, p50/p99,
  both from the change and from the first poll that saw it (the latter is the controller's
  own share; the former adds up to one poll period). Measured on extra services whose
  homes answer from an in-process reporter, with a poll of samples 1, quorum 1, period 1s;
- API writes per minute in steady state, from the routing controller's write counter and,
  independently, from the TrafficMap watch events by writer, the publisher's too (target:
  0); the steady minute starts once no map has changed for 15 s (the publisher follows
  the routing controller's writes for a while after every home has a ceiling);
- controller memory per home: resident memory after convergence minus before any
  service existed, divided by the number of homes.

Not a test: the figures depend on the machine. Usage: python bench/controller_scale/run.py
[--services 1000] [--steady-seconds 60] [--trials 40]. In seconds, for a check that it runs
(`tests/bench`): --services 3 --probes 1 --trials 1 --steady-seconds 1 --quiet-seconds 1
--no-restart
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import yaml
from aiohttp import web
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.core.generic_client import ALL_NS
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nginx_reporter import free_port, nginx_reporter

from ome_routing.core.report import format_rfc3339
from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools

CLUSTERS = ("worker-a", "worker-b", "worker-c")
NAMESPACES = 10
CHART_POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 3,
    "quorum": 2,
    "period": "10s",
    "timeout": "3s",
    "maxAge": "30s",
}
FAST_POLL = {
    **CHART_POLL,
    "samples": 1,
    "quorum": 1,
    "period": "1s",
    "timeout": "500ms",
    "maxAge": "5s",
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_values(workdir: Path, routing: dict[str, Any]) -> None:
    """`workdir/values.yaml`, the values file every controller of a run reads: a
    multi-cluster control plane with the `routing` block given."""
    values = {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": routing},
            }
        }
    }
    (workdir / "values.yaml").write_text(yaml.safe_dump(values))


class ChangingReporter:
    """In-process reporter for the latency homes: records when a changed count is first polled."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        #: the (home, count) pairs a trial waits for; only those are timed
        self.awaiting: set[tuple[str, int]] = set()
        self.first_seen: dict[tuple[str, int], float] = {}
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def handle(request: web.Request) -> web.Response:
            home = request.match_info["home"]
            count = self.counts.get(home, 4)
            if (home, count) in self.awaiting:
                self.first_seen.setdefault((home, count), time.monotonic())
            body = {"servable": count, "observedAt": format_rfc3339(datetime.now(UTC))}
            return web.json_response(body)

        app = web.Application()
        app.router.add_get("/{home}/capacity", handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


#: TrafficMaps per page of a list: a list of 30,000 maps in one answer is some 100 MB
#: for the API server to encode, and can outlast its 60 s request timeout under load.
PAGE = 500


def reported(tmap: Any) -> int:
    """How many of a TrafficMap's homes have a ceiling (`capacity.reported`)."""
    entries = (tmap.get("spec") or {}).get("entries") or []
    return sum(1 for e in entries if "reported" in (e.get("capacity") or {}))


def last_writer(obj: Any) -> str:
    """Who made a watch event's change: the field manager of the newest `managedFields`
    entry (the routing controller's `ome-routing` for the spec and `ome-trafficmap-routing`
    for its status, the publisher's `ome-trafficmap-publisher`), with its subresource."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    if not entries:
        return "unknown"
    newest = max(entries, key=lambda entry: str(entry.get("time") or ""))
    subresource = newest.get("subresource")
    manager = str(newest.get("manager") or "unknown")
    return f"{manager}/{subresource}" if subresource else manager


#: Seconds without a TrafficMap event after which the maps are taken to be at rest
#: (`--quiet-seconds`).
QUIET_SECONDS = 15.0


async def current_revision(client: AsyncClient) -> str:
    """The store's revision now, from the first page of a list of one map."""
    listing = client.list(TrafficMap, namespace=ALL_NS, chunk_size=1)
    async for _ in listing:
        break
    return listing.resourceVersion


class MapEvents:
    """A watch of every TrafficMap from the store's revision at `start`: its events by
    writer (`last_writer`), and when the last one came. A watch that ends or fails
    starts over from the revision then."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self.writers: dict[str, int] = {}
        self.started = self.last = 0.0
        self._task: asyncio.Task[None] | None = None

    @property
    def count(self) -> int:
        return sum(self.writers.values())

    async def start(self) -> None:
        revision = await current_revision(self._client)
        self.started = self.last = time.monotonic()
        self._task = asyncio.create_task(self._watch(revision))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self, revision: str | None) -> None:
        while True:
            try:
                if revision is None:
                    revision = await current_revision(self._client)
                async for _kind, obj in self._client.watch(
                    TrafficMap, namespace=ALL_NS, resource_version=revision
                ):
                    self.last = time.monotonic()
                    writer = last_writer(obj)
                    self.writers[writer] = self.writers.get(writer, 0) + 1
            except (ApiError, httpx2.HTTPError) as err:
                log(f"watching TrafficMaps: {err}; watching again")
            revision = None


async def wait_for_rest(
    client: AsyncClient, limit: float, quiet: float
) -> tuple[float, dict[str, int]]:
    """Seconds until no TrafficMap changed for `quiet` seconds, and the events until then
    by writer."""
    events = MapEvents(client)
    await events.start()
    try:
        while time.monotonic() - events.last < quiet:
            if time.monotonic() - events.started > limit:
                raise SystemExit(f"TrafficMaps still changing {limit:.0f}s after convergence")
            await asyncio.sleep(0.5)
    finally:
        events.stop()
    return events.last - events.started, events.writers


async def wait_for_ceilings(client: AsyncClient, homes: int, started: float, limit: float) -> None:
    """Return once `homes` homes have a ceiling: a paged list, then a watch of TrafficMaps
    (listing every map again and again would be most of the API server's work at scale).
    A watch that ends or fails starts over from a new list."""
    counts: dict[tuple[str, str], int] = {}

    def key(tmap: Any) -> tuple[str, str]:
        meta = tmap.get("metadata") or {}
        return str(meta.get("namespace")), str(meta.get("name"))

    while True:
        left = limit - (time.monotonic() - started)
        try:
            async with asyncio.timeout(max(left, 0.001)):
                counts.clear()
                listing = client.list(TrafficMap, namespace=ALL_NS, chunk_size=PAGE)
                async for tmap in listing:
                    counts[key(tmap)] = reported(tmap)
                ready = sum(counts.values())
                if ready >= homes:
                    return
                async for kind, tmap in client.watch(
                    TrafficMap, namespace=ALL_NS, resource_version=listing.resourceVersion
                ):
                    name = key(tmap)
                    ready -= counts.pop(name, 0)
                    if kind != "DELETED":
                        counts[name] = reported(tmap)
                        ready += counts[name]
                    if ready >= homes:
                        return
        except TimeoutError:
            raise SystemExit(
                f"only {sum(counts.values())}/{homes} homes converged in {limit:.0f}s"
            ) from None
        except (ApiError, httpx2.HTTPError) as err:
            log(f"watching TrafficMaps: {err}; listing them again")


async def heap_snapshot(controller: subprocess.Popen[bytes], path: Path) -> Any:
    """A tracemalloc snapshot of a controller started with `traced`."""
    import tracemalloc

    controller.send_signal(signal.SIGUSR1)
    collected = path.with_name(path.name + ".collected")
    while not collected.exists():
        await asyncio.sleep(0.2)
    return tracemalloc.Snapshot.load(str(path)), tracemalloc.Snapshot.load(str(collected))


async def full_collection(controller: subprocess.Popen[bytes], done: Path) -> None:
    """A full collection and `malloc_trim` in a controller started through `traced.py`;
    logs pymalloc's arenas and blocks before and after it."""
    controller.send_signal(signal.SIGUSR1)
    while not done.exists():
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.5)
    for when, stats in zip(("before", "after"), arena_stats(done.read_text()), strict=False):
        log(f"pymalloc {when} the full collection: " + ", ".join(f"{k} {v}" for k, v in stats))


#: The lines of `sys._debugmallocstats()` that say how full pymalloc's arenas are.
ARENA_LINES = (
    "# arenas allocated current",
    "# bytes in allocated blocks",
    "# bytes in available blocks",
    "unused pools * 16384 bytes",
    "# bytes lost to pool headers",
    "# bytes lost to quantization",
    "Total",
)


def arena_stats(text: str) -> list[list[tuple[str, str]]]:
    """Per report in `text` (one per `_debugmallocstats` call): the `ARENA_LINES` figures."""
    reports: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        if line.startswith("Small block threshold"):
            reports.append([])
        label, _, value = line.partition("=")
        label = label.strip().lstrip("0123456789 ")
        if reports and any(label.endswith(name) for name in ARENA_LINES) and value:
            if label == "Total" and any(k == "Total" for k, _ in reports[-1]):
                continue
            reports[-1].append((label, value.strip()))
    return reports


def print_heap(base: Any, loaded: Any, homes: int, top: int) -> None:
    """What grew between the two snapshots, biggest first, in bytes per home."""
    grown = loaded.compare_to(base, "lineno")
    total = sum(stat.size_diff for stat in grown)
    log(f"traced heap grew {total / homes:.0f} B per home; biggest lines:")
    for stat in grown[:top]:
        frame = stat.traceback[0]
        log(
            f"  {stat.size_diff / homes:8.1f} B/home {stat.count_diff / homes:6.2f} objects/home"
            f"  {frame.filename.rsplit('site-packages/', 1)[-1]}:{frame.lineno}"
        )


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds the process has used (`/proc/<pid>/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_field(pid: int, name: str) -> int:
    """The number a line of `/proc/<pid>/status` gives for `name` (in kB for sizes)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/{pid}/status")


def rss_bytes(pid: int) -> int:
    return status_field(pid, "VmRSS") * 1024


def isvc(namespace: str, name: str, capacity: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"placement": {"policy": "ClusterAffinity", "mode": "All"}}
    if capacity is not None:
        spec["routing"] = {"capacity": capacity}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def placement(endpoints: dict[str, str]) -> dict[str, Any]:
    return {
        "status": {
            "placement": {
                "phase": "Placed",
                "candidates": [
                    {
                        "cluster": c,
                        "phase": "Admitted",
                        "endpoint": e,
                        "admittedReplicas": 4,
                        "readyReplicas": 4,
                    }
                    for c, e in endpoints.items()
                ],
            }
        }
    }


async def bounded(coros: list[Any], limit: int = 16) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> None:
        async with gate:
            await coro

    await asyncio.gather(*(one(c) for c in coros))


async def writes_total(metrics_url: str) -> float:
    async with (
        aiohttp.ClientSession(trust_env=False) as session,
        session.get(metrics_url) as response,
    ):
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("ome_routing_trafficmap_writes_total{")
    )


async def start_controller(
    workdir: Path,
    plane: LocalControlPlane,
    metrics_port: int,
    name: str,
    traced: bool = False,
    frames: int = 1,
    stalls: Path | None = None,
) -> tuple[subprocess.Popen[bytes], Any]:
    """Start the controller (through `traced.py` if `traced` or `stalls`); returns once it
    has started. With `stalls`, the controller appends what held its event loop there."""
    traced = traced or stalls is not None
    log_path = workdir / f"{name}.log"
    controller_log = log_path.open("wb")
    main = (
        [str(Path(__file__).with_name("traced.py"))] if traced else ["-m", "ome_routing.cli.main"]
    )
    controller = subprocess.Popen(
        [
            sys.executable,
            *main,
            "controller",
            "--config",
            str(workdir / "values.yaml"),
            "--kubeconfig",
            str(plane.kubeconfig),
            "--namespace",
            "default",
            "--no-leader-elect",
            "--metrics-bind-address",
            f"127.0.0.1:{metrics_port}",
        ],
        stdout=controller_log,
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            "HEAP_SNAPSHOT": str(workdir / "heap"),
            "HEAP_FRAMES": str(frames),
            "STALL_LOG": str(stalls or ""),
        },
    )
    while "controller started" not in log_path.read_text():
        if controller.poll() is not None:
            raise SystemExit(log_path.read_text())
        await asyncio.sleep(0.1)
    return controller, controller_log


async def stop_controller(controller: subprocess.Popen[bytes], controller_log: Any) -> None:
    controller.send_signal(signal.SIGTERM)
    try:
        controller.wait(timeout=30)
    except subprocess.TimeoutExpired:
        controller.kill()
    controller_log.close()


async def gauge(metrics_url: str, name: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(metrics_url) as response:
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


async def restart(
    workdir: Path, plane: LocalControlPlane, metrics_url: str, homes: int, period: float
) -> dict[str, float]:
    """Start the controller again over the converged services: how long until it holds
    every home and is ready, and how many TrafficMap writes its first period makes."""
    port = int(metrics_url.rsplit(":", 1)[1].split("/", 1)[0])
    started = time.monotonic()
    controller, controller_log = await start_controller(workdir, plane, port, "restarted")
    try:
        up = time.monotonic() - started
        while await gauge(metrics_url, "ome_routing_observed_homes") < homes:
            if time.monotonic() - started > 600:
                raise SystemExit("the restarted controller did not hold every home in 10 minutes")
            await asyncio.sleep(0.2)
        holding = time.monotonic() - started
        w0 = await writes_total(metrics_url)
        await asyncio.sleep(period)
        writes = await writes_total(metrics_url) - w0
        rss = rss_bytes(controller.pid)
        log(
            f"restarted: started after {up:.1f}s, every home held after {holding:.1f}s, "
            f"{writes:.0f} writes in the next {period:.0f}s, resident {rss / 2**20:.1f} MiB"
        )
    finally:
        await stop_controller(controller, controller_log)
    return {
        "restart_started_seconds": round(up, 1),
        "restart_holds_every_home_seconds": round(holding, 1),
        "restart_writes_in_first_period": writes,
        "restart_rss_mib": round(rss / 2**20, 1),
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main_async(
    args: argparse.Namespace, plane: LocalControlPlane, endpoint: str, workdir: Path
) -> dict[str, Any]:
    # listing tens of thousands of TrafficMaps takes longer than lightkube's default timeout
    client = AsyncClient(
        KubeConfig.from_file(plane.kubeconfig),
        trust_env=False,
        field_manager="bench",
        timeout=httpx2.Timeout(300.0),
    )
    reporter = ChangingReporter()
    await reporter.start()
    routing: dict[str, Any] = {"enabled": True, "capacity": CHART_POLL}
    if args.max_concurrent_requests is not None:
        routing["observer"] = {"maxConcurrentRequests": args.max_concurrent_requests}
    write_values(workdir, routing)
    metrics_port = free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    traced = args.heap_top > 0
    controller, controller_log = await start_controller(
        workdir,
        plane,
        metrics_port,
        "controller",
        traced or args.full_collection,
        1 if traced else 0,
        args.stalls,
    )
    try:
        await asyncio.sleep(2)
        base_rss = rss_bytes(controller.pid)
        base_heap = await heap_snapshot(controller, workdir / "heap.0") if traced else None
        if args.full_collection:
            await full_collection(controller, workdir / "heap.0.collected")
            base_rss = rss_bytes(controller.pid)

        namespaces = [f"bench-{i}" for i in range(NAMESPACES)]
        for ns in namespaces:
            await client.create(Namespace(metadata=ObjectMeta(name=ns)))
        services = [(namespaces[i % NAMESPACES], f"svc-{i:04d}") for i in range(args.services)]
        probes = [("bench-latency", f"probe-{i:02d}") for i in range(args.probes)]
        await client.create(Namespace(metadata=ObjectMeta(name="bench-latency")))
        started = time.monotonic()
        await bounded(
            [client.create(InferenceService.from_dict(isvc(ns, n, None))) for ns, n in services]
        )
        await bounded(
            [client.create(InferenceService.from_dict(isvc(ns, n, FAST_POLL))) for ns, n in probes]
        )
        await bounded(
            [
                client.patch(
                    InferenceService.Status,
                    n,
                    placement({c: f"{endpoint}/{ns}/{n}/{c}" for c in CLUSTERS}),
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )
                for ns, n in services
            ]
        )
        await bounded(
            [
                client.patch(
                    InferenceService.Status,
                    n,
                    placement({c: f"{reporter.url}/{n}-{c}" for c in CLUSTERS}),
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )
                for ns, n in probes
            ]
        )
        created = time.monotonic() - started
        homes = (len(services) + len(probes)) * len(CLUSTERS)
        log(
            f"created {len(services) + len(probes)} services ({homes} homes) in {created:.1f}s; waiting for ceilings"
        )

        await wait_for_ceilings(client, homes, started, args.converge_limit)
        converged = time.monotonic() - started
        log(f"every home has a ceiling after {converged:.1f}s")

        # the publisher follows the routing controller's writes (a finalizer, its claim and
        # status for every map, again for each new generation): at rest is when it is done
        resting, rest_writers = await wait_for_rest(client, args.converge_limit, args.quiet_seconds)
        log(
            f"TrafficMaps at rest {resting:.1f}s after every home had a ceiling "
            f"(no event for {args.quiet_seconds:.0f}s); events until then by writer: "
            f"{rest_writers or 'none'}"
        )
        loaded_rss = rss_bytes(controller.pid)
        collected_rss = None
        if args.full_collection:
            await full_collection(controller, workdir / "heap.1.collected")
            collected_rss = rss_bytes(controller.pid)
        if traced:
            loaded_heap = await heap_snapshot(controller, workdir / "heap.1")
            log("as it is:")
            print_heap(base_heap[0], loaded_heap[0], homes, args.heap_top)
            log("after a full garbage collection:")
            print_heap(base_heap[1], loaded_heap[1], homes, args.heap_top)
        w0 = await writes_total(metrics_url)
        # the watch starts from now: a first page gives the store's current revision (a
        # whole paged list's is that of its first page, and the watch would replay every
        # write made while the rest of the list was read)
        events = MapEvents(client)
        await events.start()
        log(f"steady state: counting writes for {args.steady_seconds}s")
        cpu0, t0 = cpu_seconds(controller.pid), time.monotonic()
        await asyncio.sleep(args.steady_seconds)
        steady_cpu = (cpu_seconds(controller.pid) - cpu0) / (time.monotonic() - t0)
        w1 = await writes_total(metrics_url)
        events.stop()
        writers = events.writers
        steady_writes = (w1 - w0) * 60 / args.steady_seconds
        steady_events = events.count * 60 / args.steady_seconds
        log(
            f"steady state: {steady_writes:.2f} writes a minute, {steady_events:.2f} TrafficMap "
            f"events a minute (by writer: {writers or 'none'}), the controller at "
            f"{steady_cpu:.2f} of a CPU; "
            f"resident {loaded_rss / 2**20:.1f} MiB "
            f"({(loaded_rss - base_rss) / homes / 1024:.2f} KiB per home)"
        )

        # change latency on the fast-poll services
        seen: dict[tuple[str, int], float] = {}
        latest = client.list(TrafficMap, namespace="bench-latency")
        async for _ in latest:
            pass

        async def watch_latency() -> None:
            async for _kind, obj in client.watch(
                TrafficMap, namespace="bench-latency", resource_version=latest.resourceVersion
            ):
                name = obj["metadata"]["name"]
                for e in (obj.get("spec") or {}).get("entries") or []:
                    reported = (e.get("capacity") or {}).get("reported")
                    if (f"{name}-{e['cluster']}", reported) in reporter.awaiting:
                        seen.setdefault((f"{name}-{e['cluster']}", reported), time.monotonic())

        watch_task = asyncio.create_task(watch_latency())
        from_change: list[float] = []
        from_poll: list[float] = []
        for trial in range(args.trials):
            ns, name = probes[trial % len(probes)]
            home = f"{name}-{CLUSTERS[trial % len(CLUSTERS)]}"
            value = 1 + trial % 3  # 1..3, always below the admitted 4, so it shows in reported
            value = value if reporter.counts.get(home, 4) != value else value + 1
            reporter.awaiting.add((home, value))
            changed = time.monotonic()
            reporter.counts[home] = value
            while (home, value) not in seen:
                if time.monotonic() - changed > 30:
                    raise SystemExit(f"no write for {home} = {value} within 30s")
                await asyncio.sleep(0.01)
            from_change.append(seen[(home, value)] - changed)
            from_poll.append(seen[(home, value)] - reporter.first_seen[(home, value)])
            log(
                f"trial {trial}: {home} = {value}, written {from_change[-1] * 1000:.0f} ms "
                f"after the change, {from_poll[-1] * 1000:.0f} ms after the poll"
            )
            reporter.awaiting.discard((home, value))
            seen.pop((home, value))
            reporter.first_seen.pop((home, value), None)
        watch_task.cancel()
        log(
            f"change latency over {len(from_change)} trials: from the change p50 "
            f"{statistics.median(from_change) * 1000:.1f} ms, p99 {pct(from_change, 0.99) * 1000:.1f} ms; "
            f"from the poll p50 {statistics.median(from_poll) * 1000:.1f} ms, "
            f"p99 {pct(from_poll, 0.99) * 1000:.1f} ms"
        )

        figures: dict[str, Any] = {
            "services": len(services) + len(probes),
            "homes": homes,
            "create_seconds": round(created, 1),
            "converge_seconds": round(converged, 1),
            "at_rest_after_converged_seconds": round(resting, 1),
            "events_until_rest_by_writer": rest_writers,
            "change_to_write_p50_ms": round(statistics.median(from_change) * 1000, 1),
            "change_to_write_p99_ms": round(pct(from_change, 0.99) * 1000, 1),
            "poll_to_write_p50_ms": round(statistics.median(from_poll) * 1000, 1),
            "poll_to_write_p99_ms": round(pct(from_poll, 0.99) * 1000, 1),
            "steady_writes_per_minute": round(steady_writes, 2),
            "steady_trafficmap_events_per_minute": round(steady_events, 2),
            "steady_trafficmap_events_by_writer": writers,
            "steady_controller_cpu": round(steady_cpu, 3),
            "rss_base_mib": round(base_rss / 2**20, 1),
            "rss_loaded_mib": round(loaded_rss / 2**20, 1),
            "memory_per_home_kib": round((loaded_rss - base_rss) / homes / 1024, 2),
        }
        if collected_rss is not None:
            figures["rss_after_full_collection_mib"] = round(collected_rss / 2**20, 1)
            figures["memory_per_home_after_full_collection_kib"] = round(
                (collected_rss - base_rss) / homes / 1024, 2
            )
    finally:
        await stop_controller(controller, controller_log)
    try:
        if args.restart:
            log("restarting the controller")
            figures.update(await restart(workdir, plane, metrics_url, homes, 10.0))
        figures["load_average"] = os.getloadavg()
        return figures
    finally:
        await reporter.stop()
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument(
        "--probes", type=int, default=10, help="extra services with a fast poll, for change latency"
    )
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--steady-seconds", type=float, default=60)
    parser.add_argument(
        "--max-concurrent-requests",
        type=int,
        help="the observer's maxConcurrentRequests (the chart's default when left out)",
    )
    parser.add_argument(
        "--converge-limit", type=float, default=600, help="seconds to wait for convergence"
    )
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=QUIET_SECONDS,
        help="seconds without a TrafficMap event after which the maps are at rest",
    )
    parser.add_argument(
        "--no-restart",
        dest="restart",
        action="store_false",
        help="skip starting the controller again over the converged services",
    )
    parser.add_argument(
        "--heap-top",
        type=int,
        default=0,
        help="run the controller under tracemalloc and print the N lines whose memory grew most",
    )
    parser.add_argument(
        "--full-collection",
        action="store_true",
        help="also measure memory per home after a full garbage collection in the controller "
        "(as its own, once its heap has grown by a quarter, would leave it)",
    )
    parser.add_argument(
        "--stalls",
        type=Path,
        metavar="FILE",
        help="the controller appends to FILE every hold-up of its event loop, garbage "
        "collection and malloc_trim of 100 ms or more, and where the loop was held "
        "(bench/controller_scale/traced.py); the bench's own log lines carry the same clock",
    )
    args = parser.parse_args()
    if args.stalls is not None:
        args.stalls = args.stalls.resolve()
    tools = ensure_tools(progress=log)
    with (
        tempfile.TemporaryDirectory(prefix="controller-bench-") as tmp,
        LocalControlPlane(tools=tools) as plane,
    ):
        workdir = Path(tmp)
        with nginx_reporter("~ /capacity$") as endpoint:
            results = asyncio.run(main_async(args, plane, endpoint, workdir))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
