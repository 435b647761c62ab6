"""The controller chart's default `resources` at work: the pod keeps 1,000 homes' maps (500
services on 2 homes each, every home polled every 5 s) at the chart's default memory limit
on the node without being OOM-killed, and its memory is measured before and after (the
figures in the chart's README come from here: run with `-s` to see them)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import pytest
import yaml
from conftest import Install
from pods import get, wait_for
from scene import CONTROLLER_NAMESPACE, FAST_POLL, routing_values
from test_charts import SELECTOR

from ome_routing_dev.demo.scene import placement_status, workload_clusters_manifest
from ome_routing_dev.devcluster import LocalControlPlane

NAMESPACE = "sized"
#: The fast poll at a period of 5 s, so that 1,000 homes keep two cores busy but not full.
POLL = {**FAST_POLL, "period": "5s", "timeout": "2s", "maxAge": "30s"}

SERVICES = 500
HOMES = ("worker-a", "worker-b")  # each service placed on both: 2 x SERVICES homes


def copies(home: str) -> str:
    """The namespace of the services' copies on `home` (the reporter's URL path names it)."""
    return f"{NAMESPACE}-{home}"


def home_copies(services: list[str]) -> str:
    """Each service's copy on each home, with no pod: the reporter answers 0 for it."""
    documents: list[dict[str, Any]] = []
    for home in HOMES:
        namespace = copies(home)
        documents.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        documents += [
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"model": {"name": name}},
            }
            for name in services
        ]
    return yaml.safe_dump_all(documents)


#: The chart's default memory limit (values.yaml `controller.resources.limits.memory`).
LIMIT_BYTES = 512 * 2**20

#: Read inside the container: the process's VmRSS and VmHWM (KiB), its memory cgroup's
#: peak usage and limit (bytes) and its OOM kills. Under cgroup v2 (`cgroup.controllers` at
#: the root) from `memory.peak` (`memory.current` before Linux 5.19), `memory.max` and
#: `memory.events`; under cgroup v1, as the local node runs on a host with hybrid cgroups,
#: from the memory hierarchy's `memory.max_usage_in_bytes`, `memory.limit_in_bytes` and
#: `memory.oom_control`. The root is the first argument, `/sys/fs/cgroup` by default.
MEMORY = """\
import os, sys
status = dict(l.split(':', 1) for l in open('/proc/1/status').read().splitlines())
root = sys.argv[1] if len(sys.argv) > 1 else '/sys/fs/cgroup'
def read(name):
    return open(os.path.join(root, name)).read().strip()
def field(text, key):
    return next(l.split()[1] for l in text.splitlines() if l.split()[0] == key)
if os.path.exists(os.path.join(root, 'cgroup.controllers')):
    has_peak = os.path.exists(os.path.join(root, 'memory.peak'))
    peak = read('memory.peak' if has_peak else 'memory.current')
    limit, ooms = read('memory.max'), field(read('memory.events'), 'oom_kill')
else:
    root = os.path.join(root, 'memory')
    peak, limit = read('memory.max_usage_in_bytes'), read('memory.limit_in_bytes')
    ooms = field(read('memory.oom_control'), 'oom_kill')
print(status['VmRSS'].split()[0], status['VmHWM'].split()[0], peak, limit, ooms)
"""


class Memory(NamedTuple):
    """The controller's memory, read inside its container (`MEMORY`)."""

    rss_mib: float
    peak_rss_mib: float
    cgroup_peak_mib: float
    #: the cgroup's limit in bytes ("max" under cgroup v2 without one)
    limit: str
    oom_kills: int


def process_memory(plane: LocalControlPlane, pod: str) -> Memory:
    shown = plane.kubectl("exec", pod, "-n", CONTROLLER_NAMESPACE, "--", "python3.11", "-c", MEMORY)
    rss, hwm, peak, limit, ooms = shown.stdout.split()
    return Memory(int(rss) / 1024, int(hwm) / 1024, int(peak) / 2**20, limit, int(ooms))


def working_set(plane: LocalControlPlane, pod: str) -> int:
    """The container's working set in bytes, from the kubelet's summary API."""
    raw = plane.kubectl("get", "--raw", "/api/v1/nodes/local-node/proxy/stats/summary").stdout
    for entry in json.loads(raw)["pods"]:
        if entry["podRef"]["name"] == pod:
            memory = entry["containers"][0].get("memory", {})
            return int(memory.get("workingSetBytes", 0))
    return 0


def services_manifest(services: list[str]) -> str:
    """The control plane's InferenceServices, each placed on both homes."""
    affinity = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(HOMES)}]}
    ]
    return yaml.safe_dump_all(
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "model": {"name": name},
                "runtime": {"name": "srt"},
                "engine": {"minReplicas": 2, "maxReplicas": 2},
                "placement": {
                    "policy": "ClusterAffinity",
                    "mode": "All",
                    "clusterAffinity": affinity,
                },
            },
        }
        for name in services
    )


@pytest.fixture
def cleaned(plane: LocalControlPlane) -> Iterator[None]:
    """The test's 1,500 InferenceServices and 500 maps gone afterwards, so that no later
    test's controller reconciles them."""
    try:
        yield
    finally:  # a namespace is emptied with one delete-collection call a kind
        namespaces = [NAMESPACE, *(copies(home) for home in HOMES)]
        plane.kubectl(
            "delete", "namespace", *namespaces, "--timeout=300s", check=False, timeout=320
        )


@pytest.mark.timeout(1500)
def test_the_default_memory_limit_holds_1000_homes_without_an_oom_kill(
    plane: LocalControlPlane, install: Install, reporter: str, cleaned: None
) -> None:
    services = [f"sized-{i:03d}" for i in range(SERVICES)]
    plane.kubectl("apply", "-f", "-", input=home_copies(services))
    plane.kubectl("apply", "-f", "-", input=workload_clusters_manifest(list(HOMES)))
    plane.kubectl("create", "namespace", NAMESPACE)
    install(routing_values(POLL))  # the chart's default resources
    (pod,) = wait_for("the controller pod", lambda: [
        p["metadata"]["name"] for p in get(plane, "pods", "-n", CONTROLLER_NAMESPACE, "-l", SELECTOR)["items"]
    ])  # fmt: skip
    resting = wait_for("a memory reading", lambda: working_set(plane, pod))
    resting_process = process_memory(plane, pod)
    assert (resting_process.limit, resting_process.oom_kills) == (str(LIMIT_BYTES), 0)
    plane.kubectl("apply", "-f", "-", input=services_manifest(services))

    def placed(name: str) -> None:
        status = placement_status({h: f"{reporter}/{copies(h)}/{name}/" for h in HOMES})
        plane.kubectl(
            "patch", "inferenceservice", name, "-n", NAMESPACE, "--subresource=status",
            "--type=merge", "-p", json.dumps(status),
        )  # fmt: skip

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(placed, services))

    def ceilings() -> int:
        maps = get(plane, "trafficmaps", "-n", NAMESPACE)["items"]
        return sum(
            1
            for m in maps
            for e in m.get("spec", {}).get("entries") or []
            if (e.get("capacity") or {}).get("reported") == 0
        )

    homes = len(HOMES) * SERVICES
    wait_for(f"{homes} ceilings", lambda: ceilings() == homes, timeout=900, interval=5)
    loaded = 0
    for _ in range(6):  # the kubelet's figures are refreshed every 10-15 s
        loaded = max(loaded, working_set(plane, pod))
        time.sleep(5)
    loaded_process = process_memory(plane, pod)
    status = get(plane, "pod", pod, "-n", CONTROLLER_NAMESPACE)["status"]["containerStatuses"][0]
    print(
        f"controller working set: {resting / 2**20:.1f} MiB resting, "
        f"{loaded / 2**20:.1f} MiB with {homes} homes polled every 5s; "
        "process RSS, peak RSS, cgroup peak (MiB): "
        f"resting {' '.join(f'{v:.1f}' for v in resting_process[:3])}, "
        f"loaded {' '.join(f'{v:.1f}' for v in loaded_process[:3])}"
    )
    assert (loaded_process.limit, loaded_process.oom_kills) == (str(LIMIT_BYTES), 0)
    assert status["restartCount"] == 0, status
    assert not status.get("lastState"), status
