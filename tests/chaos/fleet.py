"""One chaos test's world: a control plane, routed services, reporters, controllers, a recorder."""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from controller_harness import FAST_POLL, ROUTING_ON, ControllerProcess, Reporter, eventually
from invariants import MapRecorder, entries
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing_dev.devcluster import LocalControlPlane

NAMESPACE = "chaos"
ADMITTED = 2
LEASE = "chaos"
CONTROLLER_NAMESPACE = "default"  # where ControllerProcess keeps its Lease


class Fleet:
    def __init__(self, plane: LocalControlPlane, workdir: Path) -> None:
        self.plane = plane
        self.workdir = workdir
        self.client = AsyncClient(
            KubeConfig.from_file(plane.kubeconfig), trust_env=False, field_manager="chaos"
        )
        self.reporters: dict[str, Reporter] = {}
        self.services: list[str] = []
        self.controllers: list[ControllerProcess] = []
        self.recorder = MapRecorder(self.client, NAMESPACE, admitted=ADMITTED)

    async def open(self) -> None:
        await self.client.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
        self.reporters = {
            "worker-a": await Reporter(servable=1).start(),
            "worker-b": await Reporter(servable=2).start(),
        }
        await self.recorder.__aenter__()

    async def close(self) -> None:
        for process in self.controllers:
            if process.process is not None and process.process.poll() is None:
                process.process.send_signal(signal.SIGCONT)
            await process.stop()
        await self.recorder.__aexit__()
        for reporter in self.reporters.values():
            await reporter.stop()
        await self.client.close()

    # -- services -----------------------------------------------------------------------

    async def route(self, count: int, **poll: Any) -> None:
        """`count` routed services, each placed on both reporters with 2 admitted replicas."""
        homes = {cluster: r.url for cluster, r in self.reporters.items()}
        for index in range(len(self.services), len(self.services) + count):
            name = f"svc-{index:03d}"
            await self.create_service(name, homes, **poll)
            self.services.append(name)

    async def create_service(self, name: str, homes: Mapping[str, str], **poll: Any) -> None:
        body = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "model": {"name": name},
                "placement": {"policy": "ClusterAffinity", "mode": "All"},
                "routing": {"capacity": {**FAST_POLL, **poll}},
            },
        }
        await self.client.create(InferenceService.from_dict(body))
        candidates = [
            {
                "cluster": cluster,
                "phase": "Admitted",
                "endpoint": url,
                "admittedReplicas": ADMITTED,
                "readyReplicas": ADMITTED,
            }
            for cluster, url in homes.items()
        ]
        await self.client.patch(
            InferenceService.Status,
            name,
            {"status": {"placement": {"phase": "Placed", "candidates": candidates}}},
            namespace=NAMESPACE,
            patch_type=PatchType.MERGE,
        )

    async def foreign_map(self, name: str = "foreign") -> None:
        """A routed service whose TrafficMap was made by someone else: never to be touched."""
        body = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "TrafficMap",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"service": name, "entries": [{"cluster": "elsewhere", "weight": 7}]},
        }
        await self.client.create(TrafficMap.from_dict(body))
        await eventually(
            lambda: _true(name in self.recorder.maps), what="the foreign map to be seen"
        )
        self.recorder.foreign.add(name)
        await self.create_service(name, {c: r.url for c, r in self.reporters.items()})

    # -- controllers --------------------------------------------------------------------

    async def start_controller(
        self,
        identity: str,
        *,
        wait: bool = True,
        observer: dict[str, Any] | None = None,
        endpoint: dict[str, Any] | None = None,
        kubeconfig: Path | None = None,
        args: Sequence[str] = (),
    ) -> ControllerProcess:
        """Start a controller; `observer` overrides chart `routing.observer` limits,
        `endpoint` sets the publisher's `endpoint` block, `kubeconfig` replaces the plane's
        (to reach the API server another way), `args` are added to its command line."""
        values = copy.deepcopy(ROUTING_ON)
        if observer:
            values["ome"]["multicluster"]["config"]["routing"]["observer"] = dict(observer)
        if endpoint:
            values["ome"]["multicluster"]["config"]["endpoint"] = dict(endpoint)
        process = ControllerProcess(
            kubeconfig or self.plane.kubeconfig,
            values,
            self.workdir,
            lease=LEASE,
            identity=identity,
            wrap=_wrapped(tuple(args)),
        )
        self.controllers.append(process.start())
        if wait:
            await process.wait_started(timeout=60)
        return process

    async def lease_holder(self) -> str | None:
        lease = await self.client.get(Lease, LEASE, namespace=CONTROLLER_NAMESPACE)
        return lease.spec.holderIdentity if lease.spec else None

    # -- what "correct" means -----------------------------------------------------------

    def expected(self) -> dict[str, int]:
        return {cluster: r.servable for cluster, r in self.reporters.items()}

    def wrong_maps(self) -> list[str]:
        """Owned maps (as the recorder last saw them) that do not follow the reporters."""
        want = self.expected()
        wrong = []
        for name in self.services:
            tmap = self.recorder.maps.get(name)
            found = entries(tmap) if tmap is not None else {}
            for cluster, servable in want.items():
                capacity = (found.get(cluster) or {}).get("capacity") or {}
                if capacity.get("reported") != servable or int(
                    capacity.get("allocated") or 0
                ) != min(ADMITTED, servable):
                    wrong.append(f"{name}/{cluster}: {capacity}")
        return wrong

    async def until_correct(self, timeout: float = 120.0) -> float:
        """Wait until every owned map follows the reporters; returns when (monotonic)."""
        await eventually(
            lambda: _true(not self.wrong_maps()),
            timeout,
            what=f"every map to follow the reporters {self.expected()}",
        )
        return time.monotonic()

    async def quiet_writes(self, seconds: float) -> int:
        """How many TrafficMap writes happen over `seconds` of rest.

        Rest begins once the writes in flight have landed: two seconds without any.
        """
        await eventually(
            lambda: _true(not self.recorder.writes_since(time.monotonic() - 2.0)),
            60,
            "the writes in flight to land",
        )
        start = time.monotonic()
        await asyncio.sleep(seconds)
        return len(self.recorder.writes_since(start))


def _traced(command: list[str]) -> list[str]:
    """`python -m ome_routing...` run by `traced_controller.py` (see there): a diagnosis aid."""
    assert command[1] == "-m", command
    return [command[0], str(Path(__file__).parent / "traced_controller.py"), *command[2:]]


def _wrapped(args: tuple[str, ...]) -> Callable[[list[str]], list[str]] | None:
    traced = bool(os.environ.get("CHAOS_TRACE_DIR"))
    if not args and not traced:
        return None

    def wrap(command: list[str]) -> list[str]:
        command = [*command, *args]
        return _traced(command) if traced else command

    return wrap


async def _true(value: bool) -> bool:
    return value
