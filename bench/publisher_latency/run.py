"""Publisher latency: a TrafficMap's new weights to the HTTPRoute that carries them.

On a local control plane with the Gateway API CRDs, the controller (routing and its
publisher) keeps `--services` services placed on two workload clusters and publishes
each on a route. Each trial changes one service's ready replicas, so that routing writes
new weights into its TrafficMap; one watch on TrafficMaps and one on HTTPRoutes (same
process, same clock) time the map's write and the route's write that carries the same
weights. Reported: p50 and p99 of route write minus map write, and of route write minus
the placement change, for the backends each local gateway needs: OME's default
ExternalName Services (Contour) and our hostname EndpointSlices (Traefik), each on a
control plane of its own, side by side. No gateway runs: this is the publisher's share
(`bench/gateway_split` measures the gateways).

With `--against TREE` (another checkout of the project, e.g. a `git worktree` of an older
commit), the same trials run on that tree's controller too, on a control plane of its
own, and each figure is also given as a ratio to that reference measured in the same run.

Not a test: the figures depend on the machine. Usage: python bench/publisher_latency/run.py
[--services 20] [--trials 60] [--gateway contour|traefik|both] [--against TREE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.types import PatchType

from ome_routing.kube.published import HTTPRoute
from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools

NAMESPACE = "bench"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def values(hostname_slices: bool) -> dict[str, Any]:
    backend: dict[str, Any] = {"rewriteHostname": True}
    if hostname_slices:
        backend["hostnameEndpointSlices"] = True
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {
                    "routing": {"enabled": True},
                    "endpoint": {
                        "globalGateway": "gateway-system/global",
                        "backendPort": 80,
                        "globalHostTemplate": "{{ .Name }}.{{ .Namespace }}.global.example.com",
                        "gatewayBackend": backend,
                    },
                },
            }
        }
    }


def placement(name: str, ready_a: int, ready_b: int) -> dict[str, Any]:
    candidates = [
        {
            "cluster": cluster,
            "phase": "Admitted",
            "endpoint": f"http://{name}.{NAMESPACE}.{cluster}.example.com/",
            "admittedReplicas": 1000,
            "readyReplicas": ready,
        }
        for cluster, ready in (("worker-a", ready_a), ("worker-b", ready_b))
    ]
    return {"status": {"placement": {"phase": "Placed", "candidates": candidates}}}


def map_weights(tmap: dict[str, Any]) -> tuple[int, ...]:
    entries = sorted((tmap.get("spec") or {}).get("entries") or [], key=lambda e: e["cluster"])
    return tuple(int(e.get("weight") or 0) for e in entries)


def route_weights(route: dict[str, Any]) -> tuple[int, ...]:
    rules = (route.get("spec") or {}).get("rules") or [{}]
    return tuple(int(r.get("weight") or 0) for r in rules[0].get("backendRefs") or [])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(
    plane: LocalControlPlane,
    services: int,
    trials: int,
    hostname_slices: bool,
    source: Path | None = None,
) -> dict[str, Any]:
    plane.kubectl("create", "namespace", NAMESPACE)
    client = AsyncClient(
        KubeConfig.from_file(plane.kubeconfig), trust_env=False, field_manager="bench"
    )
    names = [f"svc-{i:03d}" for i in range(services)]
    for name in names:
        body = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"placement": {"policy": "ClusterAffinity", "mode": "All"}, "routing": {}},
        }
        await client.create(InferenceService.from_dict(body))
        await client.patch(
            InferenceService.Status, name, placement(name, 2, 1), namespace=NAMESPACE,
            patch_type=PatchType.MERGE,
        )  # fmt: skip

    workdir = Path(tempfile.mkdtemp(prefix="publisher-bench-"))
    config = workdir / "values.yaml"
    config.write_text(yaml.safe_dump(values(hostname_slices)))
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    if source is not None:  # the reference: the controller of another checkout
        env["PYTHONPATH"] = str(source / "src")
    controller_log = (workdir / "controller.log").open("wb")
    controller = subprocess.Popen(
        [sys.executable, "-m", "ome_routing.cli.main", "controller", "--config", str(config),
         "--kubeconfig", str(plane.kubeconfig), "--namespace", "default",
         "--metrics-bind-address", "127.0.0.1:0", "--no-leader-elect"],
        stdout=controller_log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    map_seen: dict[tuple[str, tuple[int, ...]], float] = {}
    route_seen: dict[tuple[str, tuple[int, ...]], float] = {}

    async def watch(
        resource: Any, seen: dict[tuple[str, tuple[int, ...]], float], weights: Any
    ) -> None:
        while True:  # a fresh CRD's storage may end the first watches
            try:
                async for _, obj in client.watch(resource, namespace=NAMESPACE):
                    raw = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
                    name = raw["metadata"]["name"].removesuffix("-global")
                    seen.setdefault((name, weights(raw)), time.monotonic())
            except Exception as err:
                log(f"watch of {resource.__name__} ended ({err}); watching again")
                await asyncio.sleep(0.2)

    watchers = [
        asyncio.create_task(watch(TrafficMap, map_seen, map_weights)),
        asyncio.create_task(watch(HTTPRoute, route_seen, route_weights)),
    ]
    try:
        log(f"waiting for {services} routes")
        deadline = time.monotonic() + 300
        while not all((n, (2, 1)) in route_seen for n in names):
            if time.monotonic() > deadline or controller.poll() is not None:
                raise SystemExit(f"routes not published; see {workdir / 'controller.log'}")
            await asyncio.sleep(0.2)
        to_route: list[float] = []
        map_to_route: list[float] = []
        for trial in range(trials):
            name = names[trial % services]
            ready_b = 2 + trial  # a new, distinct weight every time: 2:(2+trial) reduced
            changed = time.monotonic()
            await client.patch(
                InferenceService.Status, name, placement(name, 2, ready_b), namespace=NAMESPACE,
                patch_type=PatchType.MERGE,
            )  # fmt: skip
            while True:
                found = [k for k in route_seen if k[0] == name and route_seen[k] >= changed]
                matched = [k for k in found if k in map_seen and map_seen[k] >= changed]
                if matched:
                    key = matched[0]
                    map_to_route.append(route_seen[key] - map_seen[key])
                    to_route.append(route_seen[key] - changed)
                    break
                await asyncio.sleep(0.005)
        report = {
            "services": services,
            "trials": trials,
            "mode": "hostnameEndpointSlices" if hostname_slices else "ExternalName",
            "map_write_to_route_write_ms": {
                "p50": round(pct(map_to_route, 0.5) * 1000, 1),
                "p99": round(pct(map_to_route, 0.99) * 1000, 1),
                "mean": round(statistics.mean(map_to_route) * 1000, 1),
            },
            "placement_change_to_route_write_ms": {
                "p50": round(pct(to_route, 0.5) * 1000, 1),
                "p99": round(pct(to_route, 0.99) * 1000, 1),
            },
        }
        return report
    finally:
        for task in watchers:
            task.cancel()
        controller.terminate()
        controller.wait(20)
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", type=int, default=20)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument(
        "--gateway",
        choices=["contour", "traefik", "both"],
        default="both",
        help="the backends of contour (ExternalName) or traefik (hostname EndpointSlices)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        help="another checkout of the project: its controller is measured too, as the reference",
    )
    args = parser.parse_args()
    against = args.against.resolve() if args.against else None
    if against is not None and not (against / "src" / "ome_routing").is_dir():
        parser.error(f"--against {args.against}: no src/ome_routing there")
    tools = ensure_tools(progress=log)
    kinds = ["contour", "traefik"] if args.gateway == "both" else [args.gateway]
    trees: list[tuple[str, Path | None]] = [("", None)]
    if against is not None:
        trees.append((" (reference)", against))
    reports = {}
    for kind in kinds:
        for suffix, tree in trees:
            log(
                f"{kind}{suffix}: the publisher writing "
                f"{'hostname EndpointSlices' if kind == 'traefik' else 'ExternalName Services'}"
            )
            with LocalControlPlane(tools=tools, gateway_api=True) as plane:
                reports[kind + suffix] = asyncio.run(
                    run(plane, args.services, args.trials, kind == "traefik", tree)
                )
    print(json.dumps(reports, indent=2))
    print(
        f"{'ms, p50 / p99':<36}"
        + "".join(f"{kind + ' (' + r['mode'] + ')':>36}" for kind, r in reports.items())
    )
    for field, label in (
        ("map_write_to_route_write_ms", "TrafficMap write -> HTTPRoute write"),
        ("placement_change_to_route_write_ms", "placement change -> HTTPRoute write"),
    ):
        cells = [f"{r[field]['p50']} / {r[field]['p99']}" for r in reports.values()]
        print(f"{label:<36}" + "".join(f"{cell:>36}" for cell in cells))
        if against is not None:
            for kind in kinds:
                this, ref = reports[kind][field], reports[kind + " (reference)"][field]
                print(
                    f"  {kind}: p50 {this['p50'] / ref['p50']:.2f}, "
                    f"p99 {this['p99'] / ref['p99']:.2f} of the reference"
                )


if __name__ == "__main__":
    main()
