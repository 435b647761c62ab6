"""What the page size of an informer's list costs: the process's peak memory, and time.

The script starts kube-apiserver and etcd (`make tools` builds them once), creates
`--services` routed InferenceServices with a placement status on two homes (as
bench/sharding does), then, for each page size in `--pages`, runs one list of them in a
fresh Python process: `kube.watching.Informer` with the shared caches' settings (packed,
the routing view), exactly as a controller lists at its start or after a lost watch. It
prints, per page size, the rise of the process's peak resident memory (`VmHWM` of
`/proc/self/status`) over the list, the list's wall time, and both as ratios to the first
page size of `--pages` (the reference), the median of `--rounds` fresh processes each.

    .venv/bin/python bench/list_pages/run.py     # [--services 2400] [--pages 500,100,50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
from pathlib import Path

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from controller_scale.run import bounded, isvc, log, placement

from ome_routing.kube.resources import InferenceService
from ome_routing_dev.devcluster import LocalControlPlane, ensure_tools

NAMESPACES = 10
CLUSTERS = ("worker-a", "worker-b")

#: one list in a fresh process: the peak's rise (MiB), the wall time (s), the objects cached
ONE_LIST = r"""
import asyncio, json, sys, time
from lightkube import AsyncClient, KubeConfig
from ome_routing.kube.resources import InferenceService
from ome_routing.kube.watching import Informer

def peak_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmHWM in /proc/self/status")

async def main(kubeconfig, page):
    client = AsyncClient(KubeConfig.from_file(kubeconfig), trust_env=False)
    informer = Informer(client, InferenceService, None, namespaced=True, packed=True, page=page)
    before = peak_mib()
    started = time.perf_counter()
    await informer._relist()
    seconds = time.perf_counter() - started
    print(json.dumps({"rise": peak_mib() - before, "seconds": seconds,
                      "cached": len(informer.cache)}))
    await client.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def create_services(kubeconfig: Path, count: int) -> None:
    client = AsyncClient(
        KubeConfig.from_file(kubeconfig),
        trust_env=False,
        field_manager="bench",
        timeout=httpx2.Timeout(120.0),
    )
    try:
        namespaces = [f"bench-{i}" for i in range(NAMESPACES)]
        for ns in namespaces:
            await client.create(Namespace(metadata=ObjectMeta(name=ns)))
        services = [(namespaces[i % NAMESPACES], f"svc-{i:05d}") for i in range(count)]
        await bounded(
            [client.create(InferenceService.from_dict(isvc(ns, n, None))) for ns, n in services]
        )
        await bounded(
            [
                client.patch(
                    InferenceService.Status,
                    n,
                    placement({c: f"http://127.0.0.1:1/{ns}/{n}/{c}" for c in CLUSTERS}),
                    namespace=ns,
                    patch_type=PatchType.MERGE,
                )
                for ns, n in services
            ]
        )
    finally:
        await client.close()


def one_list(kubeconfig: Path, page: int) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", ONE_LIST, str(kubeconfig), str(page)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"a list of page {page} failed:\n{result.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(result.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=2400)
    parser.add_argument(
        "--pages", default="500,100,50", help="page sizes; the first is the reference"
    )
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per page size")
    args = parser.parse_args()
    pages = [int(p) for p in args.pages.split(",")]
    tools = ensure_tools(progress=log)
    with LocalControlPlane(tools=tools) as plane:
        log(f"creating {args.services} InferenceServices")
        asyncio.run(create_services(plane.kubeconfig, args.services))
        runs: dict[int, list[dict[str, float]]] = {page: [] for page in pages}
        for _ in range(args.rounds):  # interleaved, so a slow moment is shared
            for page in pages:
                runs[page].append(one_list(plane.kubeconfig, page))
    rows = {
        page: (
            statistics.median(r["rise"] for r in found),
            statistics.median(r["seconds"] for r in found),
            min(int(r["cached"]) for r in found),
        )
        for page, found in runs.items()
    }
    ref_rise, ref_seconds, _ = rows[pages[0]]
    print()
    print(
        f"One list of {args.services} InferenceServices, a fresh process each "
        f"(median of {args.rounds}); reference: page {pages[0]}"
    )
    print()
    print("| page | cached | peak memory rise (MiB) | ratio | list time (s) | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for page, (rise, seconds, cached) in rows.items():
        print(
            f"| {page} | {cached} | {rise:.1f} | {rise / max(ref_rise, 1e-9):.2f} "
            f"| {seconds:.2f} | {seconds / max(ref_seconds, 1e-9):.2f} |"
        )


if __name__ == "__main__":
    main()
