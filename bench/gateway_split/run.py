"""Real traffic through each gateway against the published weights, and how fast a change reaches it.

One service `chat` placed on worker-a and worker-b, each a stand-in (model server and
capacity reporter) on its own 127.x.y.z address; the controller with routing and the
publisher on, polling every second (samples 1, quorum 1), run in the gateway's name
sandbox. Each gateway in turn, on a control plane of its own: Traefik (the publisher
writing hostname EndpointSlices) and Contour + Envoy (OME's default ExternalName
backends). Measured for each:

- split: 3,000 requests through the gateway to the global host, counted per cluster, next to
  the TrafficMap's weights (2:1); for Envoy, with the binomial test's bounds;
- change latency: worker-b's reporter toggles between 1 and 0 (weights 2:1 and 1:0): from
  the TrafficMap watch event that shows the new weights to the HTTPRoute watch event that
  shows them (the publisher's share), and to the gateway's split following (the first
  request served by worker-b after it came back, or the last one it served before it
  left); and end to end, from the reporter's change to that request. p50/p99 over the
  trials. A request loop runs all the time (one request after another).

Not a test: the figures depend on the machine. Usage: python bench/gateway_split/run.py
[--gateway traefik|contour|both] [--requests 3000] [--trials 20]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from ome_routing.core.report import format_rfc3339
from ome_routing_dev.demo.splits import acceptance, expected_split, split_is_plausible
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools
from ome_routing_dev.devcluster.gateway_base import SandboxedGateway
from ome_routing_dev.devcluster.gateway_contour import ContourGateway
from ome_routing_dev.devcluster.gateways import GATEWAY_NAMES, ensure_gateway_binaries, gateway_type
from ome_routing_dev.devcluster.processes import free_ports, identify, spawn, terminate

ISVC, NAMESPACE = "chat", "bench"
CLUSTERS = ("worker-a", "worker-b")
POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 1,
    "quorum": 1,
    "period": "1s",
    "timeout": "500ms",
    "maxAge": "3s",
}


class Home:
    """A workload cluster's model server and reporter on its own loopback address."""

    def __init__(self, cluster: str, address: str, port: int, servable: int) -> None:
        self.cluster, self.address, self.port, self.servable = cluster, address, port, servable
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def capacity(_: web.Request) -> web.Response:
            body = {"servable": self.servable, "observedAt": format_rfc3339(datetime.now(UTC))}
            return web.json_response(body)

        async def serve(_: web.Request) -> web.Response:
            return web.Response(text=self.cluster)

        app = web.Application()
        app.router.add_get("/capacity", capacity)
        app.router.add_route("*", "/{tail:.*}", serve)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, self.address, self.port).start()


def host_of(cluster: str) -> str:
    return f"{ISVC}.{NAMESPACE}.{cluster}.example.com"


def values(gateway: SandboxedGateway, port: int) -> dict[str, Any]:
    endpoint: dict[str, Any] = {
        "globalGateway": gateway.gateway_ref,
        "backendPort": port,
        "globalHostTemplate": "{{ .Name }}.{{ .Namespace }}.global.example.com",
    }
    if gateway.needs_hostname_endpoint_slices:
        endpoint["gatewayBackend"] = {"hostnameEndpointSlices": True}
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": {"enabled": True}, "endpoint": endpoint},
            }
        }
    }


def setup_service(plane: LocalControlPlane, port: int) -> None:
    isvc = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": ISVC, "namespace": NAMESPACE},
        "spec": {
            "model": {"name": ISVC},
            "placement": {"policy": "ClusterAffinity", "mode": "All"},
            "routing": {"capacity": POLL},
        },
    }
    plane.kubectl("create", "namespace", NAMESPACE)
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(isvc))
    candidates = [
        {
            "cluster": c,
            "phase": "Admitted",
            "endpoint": f"http://{host_of(c)}:{port}",
            "admittedReplicas": 2,
            "readyReplicas": 2,
        }
        for c in CLUSTERS
    ]
    patch = {"status": {"placement": {"phase": "Placed", "candidates": candidates}}}
    plane.kubectl(
        "patch",
        "inferenceservice",
        ISVC,
        "-n",
        NAMESPACE,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
    )


class Watch:
    """`kubectl get -w` of one object, each event's weights stamped with the time it arrived."""

    def __init__(self, plane: LocalControlPlane, kind: str, name: str, weights: Any) -> None:
        self.events: list[tuple[float, tuple[int, ...]]] = []
        command = [
            str(plane.tools.kubectl),
            "get",
            kind,
            name,
            "-n",
            NAMESPACE,
            "-w",
            "--output-watch-events",
            "-o",
            "json",
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=plane.env())
        self._weights = weights
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self.process.stdout:
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except json.JSONDecodeError:
                continue
            buffer = buffer.lstrip()[end:]
            weights = self._weights(event.get("object") or {})
            if weights is not None and (not self.events or self.events[-1][1] != weights):
                self.events.append((time.monotonic(), weights))

    def first(self, weights: tuple[int, ...], after: float) -> float | None:
        return next((t for t, w in self.events if t >= after and w == weights), None)


def exists(plane: LocalControlPlane, kind: str, name: str) -> bool:
    return plane.kubectl("get", kind, name, "-n", NAMESPACE, check=False).returncode == 0


def map_weights(tmap: dict[str, Any]) -> tuple[int, ...] | None:
    entries = (tmap.get("spec") or {}).get("entries")
    if not entries:
        return None
    return tuple(e.get("weight", 0) for e in sorted(entries, key=lambda e: e["cluster"]))


def route_weights(route: dict[str, Any]) -> tuple[int, ...] | None:
    rules = (route.get("spec") or {}).get("rules")
    if not rules:
        return None
    return tuple(ref.get("weight", 1) for ref in rules[0].get("backendRefs", []))


class Traffic:
    """Requests to the global host, one after another, each stamped with who served it."""

    def __init__(self, port: int, host: str) -> None:
        self.port, self.host = port, host
        self.log: list[tuple[float, str]] = []
        self.running = True
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        while self.running:
            try:
                connection.request("GET", "/", headers={"Host": self.host})
                response = connection.getresponse()
                body = response.read().decode()
                self.log.append((time.monotonic(), body if response.status == 200 else ""))
            except (OSError, http.client.HTTPException):
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)


def window(gateway: SandboxedGateway, host: str, count: int) -> Counter[str]:
    return Counter(
        body for status, body in (gateway.get(host) for _ in range(count)) if status == 200
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def wait(what: str, check: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"gave up waiting for {what}")


def gateway_follows(gateway: SandboxedGateway, host: str, weights: dict[str, int]) -> bool:
    """The gateway serves `weights`: Envoy's route table says so, or Traefik's round robin
    gives a window split exactly so."""
    if isinstance(gateway, ContourGateway):
        served = gateway.served_weights(host) or {}
        return sorted(w for w in served.values() if w) == sorted(w for w in weights.values() if w)
    probe = 10 * sum(weights.values())
    return dict(window(gateway, host, probe)) == expected_split(weights, probe)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gateway", choices=[*GATEWAY_NAMES, "both"], default="both")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    kinds = list(GATEWAY_NAMES) if args.gateway == "both" else [args.gateway]
    results = {kind: measure(kind, args) for kind in kinds}
    report(results, args)


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    ensure_gateway_binaries(kind, progress=lambda m: print(f"[tools] {m}", file=sys.stderr))
    print(f"measuring {kind} ...", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix=f"gateway-split-{kind}-"))
    (port,) = free_ports(1)
    prefix = f"127.{random.randrange(100, 250)}.{random.randrange(1, 255)}"
    homes = {
        c: Home(c, f"{prefix}.{i + 1}", port, servable)
        for i, (c, servable) in enumerate(zip(CLUSTERS, (2, 1), strict=True))
    }
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    for home in homes.values():
        asyncio.run_coroutine_threadsafe(home.start(), loop).result()
    names = {host_of(c): h.address for c, h in homes.items()}
    with (
        LocalControlPlane(work / "plane", ensure_tools(), gateway_api=True) as plane,
        gateway_type(kind)(plane, names) as gateway,
    ):
        setup_service(plane, port)
        config = work / "values.yaml"
        config.write_text(yaml.safe_dump(values(gateway, port)))
        (metrics,) = free_ports(1)
        argv = gateway.sandbox.wrap(
            [
                sys.executable,
                "-m",
                "ome_routing.cli.main",
                "controller",
                "--config",
                str(config),
                "--kubeconfig",
                str(plane.kubeconfig),
                "--namespace",
                NAMESPACE,
                "--metrics-bind-address",
                f"127.0.0.1:{metrics}",
                "--no-leader-elect",
            ]
        )
        child = spawn("controller", argv, work / "controller.log", outlive_parent=False)
        try:
            return run(plane, gateway, homes, args)
        finally:
            terminate(identify("controller", child), grace=10, child=child)
            for home in homes.values():
                if home.runner is not None:
                    asyncio.run_coroutine_threadsafe(home.runner.cleanup(), loop).result()
            loop.call_soon_threadsafe(loop.stop)


def run(
    plane: LocalControlPlane,
    gateway: SandboxedGateway,
    homes: dict[str, Home],
    args: argparse.Namespace,
) -> dict[str, Any]:
    host = f"{ISVC}.{NAMESPACE}.global.example.com"
    # `kubectl get -w` of an object that does not exist yet exits: wait for both first.
    for kind, name in (("trafficmap", ISVC), ("httproute", f"{ISVC}-global")):
        wait(f"the {kind}", lambda k=kind, n=name: exists(plane, k, n))
    tmaps = Watch(plane, "trafficmap", ISVC, map_weights)
    routes = Watch(plane, "httproute", f"{ISVC}-global", route_weights)
    wait("the route at 2:1", lambda: routes.events and routes.events[-1][1] == (2, 1))
    # A gateway applies a new route a moment later (Traefik after its provider throttle):
    # wait until it serves 2:1.
    weights = {"worker-a": 2, "worker-b": 1}
    wait("the gateway at 2:1", lambda: gateway_follows(gateway, host, weights))
    answers = [gateway.get(host) for _ in range(args.requests)]
    counts = Counter(body for status, body in answers if status == 200)

    traffic = Traffic(gateway.port, host)
    to_route: list[float] = []
    to_split: list[float] = []
    end_to_end: list[float] = []
    for trial in range(args.trials):
        route_share, split_share, whole = one_trial(trial % 2 == 0, homes, tmaps, routes, traffic)
        to_route.append(route_share)
        to_split.append(split_share)
        end_to_end.append(whole)
        time.sleep(0.5)
    traffic.running = False
    return {
        "counts": counts,
        "map -> route": to_route,
        "map -> split": to_split,
        "reporter -> split": end_to_end,
        "loop": len(traffic.log),
    }


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    kinds = list(results)
    n = args.requests
    lo, hi = acceptance(n, 2 / 3)
    print(f"split over {n} requests, weights worker-a 2, worker-b 1:")
    print(f"  {'':<28}" + "".join(f"{kind:>24}" for kind in kinds))
    for cluster in CLUSTERS:
        cells = [
            f"{r['counts'][cluster]} ({r['counts'][cluster] / n:.4f})" for r in results.values()
        ]
        print(f"  {cluster:<28}" + "".join(f"{cell:>24}" for cell in cells))
    other = [str(n - sum(r["counts"][c] for c in CLUSTERS)) for r in results.values()]
    print(f"  {'other answers':<28}" + "".join(f"{cell:>24}" for cell in other))
    verdicts = []
    for kind, r in results.items():
        counts = {c: r["counts"][c] for c in CLUSTERS if r["counts"][c]}
        if kind == "traefik":
            exact = counts == expected_split({"worker-a": 2, "worker-b": 1}, n)
            verdicts.append("exactly 2:1" if exact else "NOT 2:1")
        else:
            plausible = split_is_plausible(counts, {"worker-a": 2, "worker-b": 1})
            verdicts.append(f"{lo}..{hi}: {'pass' if plausible else 'FAIL'}")
    print(f"  {'check':<28}" + "".join(f"{cell:>24}" for cell in verdicts))
    print(f"change latency over {args.trials} trials (worker-b 1 -> 0 -> 1 ...), p50 / p99 ms:")
    for name, label in (
        ("map -> route", "TrafficMap -> HTTPRoute"),
        ("map -> split", "TrafficMap -> gateway"),
        ("reporter -> split", "reporter -> gateway"),
    ):
        cells = [
            f"{percentile(r[name], 0.5) * 1000:.0f} / {percentile(r[name], 0.99) * 1000:.0f}"
            for r in results.values()
        ]
        print(f"  {label:<28}" + "".join(f"{cell:>24}" for cell in cells))
    means = [f"{statistics.mean(r['reporter -> split']) * 1000:.0f}" for r in results.values()]
    print(f"  {'reporter -> gateway (mean)':<28}" + "".join(f"{cell:>24}" for cell in means))
    loops = [str(r["loop"]) for r in results.values()]
    print(f"  {'requests in the loop':<28}" + "".join(f"{cell:>24}" for cell in loops))


def one_trial(
    leaving: bool, homes: dict[str, Home], tmaps: Watch, routes: Watch, traffic: Traffic
) -> tuple[float, float, float]:
    """worker-b leaves (or comes back): (map write -> route write, map write -> split,
    reporter change -> split)."""
    target = (1, 0) if leaving else (2, 1)  # the map reduces 2:0 to 1:0
    changed = time.monotonic()
    homes["worker-b"].servable = 0 if leaving else 1
    written: float = wait("the TrafficMap", lambda: tmaps.first(target, changed))
    routed: float = wait("the HTTPRoute", lambda: routes.first(target, changed))
    if leaving:
        # The split followed at the last request worker-b served: wait until it has served
        # none for a second, then find that request.
        wait("worker-b to leave", lambda: _quiet(traffic, "worker-b", 1.0))
        last = max(t for t, body in traffic.log if body == "worker-b")
        return routed - written, max(0.0, last - written), max(0.0, last - changed)
    first: float = wait(
        "worker-b to come back",
        lambda: next((t for t, body in traffic.log if t >= written and body == "worker-b"), None),
    )
    return routed - written, first - written, first - changed


def _quiet(traffic: Traffic, cluster: str, seconds: float) -> bool:
    now = time.monotonic()
    recent = [body for t, body in traffic.log if t > now - seconds]
    return bool(recent) and cluster not in recent


if __name__ == "__main__":
    main()
