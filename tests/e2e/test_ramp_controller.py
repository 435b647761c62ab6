"""Ramps (ours) on a real API server: the chart's value, the service's annotation, the
map's `routing.ome-routing.io/ramp`, a restart in the middle of a ramp, turning it off.

Two reporters serve 2 replicas each (targets 1:1) with the fast poll (period 1s, so a step
a second). worker-b's reports drop to 0, which takes its weight to 0 at once, and come
back: the ramp takes it back up. Every version of the map comes from a watch.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    SHARDS,
    ControllerProcess,
    Reporter,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    log_fields,
    place,
)
from lightkube import AsyncClient
from map_watch import MapHistory, resource_version

from ome_routing.core.shards import shard_of
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(180)

NAME = "svc"
RAMP = "routing.ome-routing.io/ramp"
MAX_INCREASE = "routing.ome-routing.io/max-increase-per-period"


def weights(tmap: dict[str, Any] | None) -> tuple[int, ...]:
    entries = ((tmap or {}).get("spec") or {}).get("entries") or []
    return tuple(e.get("weight", 0) for e in entries)


def ramp_of(tmap: dict[str, Any]) -> dict[str, Any] | None:
    text = (tmap["metadata"].get("annotations") or {}).get(RAMP)
    return json.loads(text) if text else None


def with_ramp(value: str) -> dict[str, Any]:
    values = yaml.safe_load(yaml.safe_dump(ROUTING_ON))
    values["ome"]["multicluster"]["config"]["routing"]["ramp"] = {"maxIncreasePerPeriod": value}
    return values


class Scene:
    def __init__(
        self,
        plane: LocalControlPlane,
        client: AsyncClient,
        workdir: Path,
        namespace: str,
        reporters: dict[str, Reporter],
    ) -> None:
        self.plane = plane
        self.client = client
        self.workdir = workdir
        self.namespace = namespace
        self.reporters = reporters
        self.lease = f"lease-{uuid.uuid4().hex[:8]}"
        self.controllers: list[ControllerProcess] = []

    async def route(self, annotations: dict[str, str] | None = None) -> None:
        manifest = yaml.safe_load(isvc_manifest(NAME, self.namespace, FAST_POLL))
        if annotations:
            manifest["metadata"]["annotations"] = annotations
        await kubectl(self.plane, "apply", "-f", "-", input=json.dumps(manifest))
        homes = {c: r.url for c, r in self.reporters.items()}
        await place(self.plane, NAME, self.namespace, homes)

    async def start(self, config: dict[str, Any]) -> ControllerProcess:
        process = ControllerProcess(
            self.plane.kubeconfig, config, self.workdir, lease=self.lease
        ).start()
        self.controllers.append(process)
        await process.wait_started()
        return process

    async def map(self) -> dict[str, Any] | None:
        return await get_map(self.plane, NAME, self.namespace)

    async def until_weights(self, wanted: tuple[int, ...]) -> dict[str, Any]:
        async def seen() -> dict[str, Any] | None:
            tmap = await self.map()
            return tmap if weights(tmap) == wanted else None

        return await eventually(seen, what=f"weights {wanted}")

    async def lose_and_recover_worker_b(self) -> MapHistory:
        """worker-b's ceiling drops to 0, then its reports come back; the map's versions
        from then on."""
        self.reporters["worker-b"].servable = 0
        await self.until_weights((1, 0))
        since = await resource_version(self.client, self.namespace, NAME)
        history = MapHistory(self.client, self.namespace, NAME, since)
        self.reporters["worker-b"].servable = 2
        return history


@pytest.fixture
async def scene(
    control_plane: LocalControlPlane, kube_client: AsyncClient, tmp_path: Path, namespace: str
) -> AsyncIterator[Scene]:
    reporters = {"worker-a": await Reporter(servable=2).start()}
    reporters["worker-b"] = await Reporter(servable=2).start()
    made = Scene(control_plane, kube_client, tmp_path, namespace, reporters)
    try:
        yield made
    finally:
        for process in made.controllers:
            await process.stop()
        for reporter in reporters.values():
            await reporter.stop()


def ramped_of_b(versions: list[dict[str, Any]]) -> list[str]:
    """worker-b's ramped capacity in each version that carries one, repeats left out."""
    seen: list[str] = []
    for version in versions:
        ramp = ramp_of(version)
        if ramp is not None and (not seen or seen[-1] != ramp["homes"]["worker-b"]["ramped"]):
            seen.append(ramp["homes"]["worker-b"]["ramped"])
    return seen


async def test_a_restart_in_the_middle_of_a_ramp_resumes_it(scene: Scene) -> None:
    """The chart's 0.1: worker-b climbs 0.2 replica a step; the controller is replaced
    after a few steps, and the new one goes on from the map, skipping nothing."""
    await scene.route()
    first = await scene.start(with_ramp("0.1"))
    await scene.until_weights((1, 1))
    history = await scene.lose_and_recover_worker_b()
    await history.until(
        lambda v: (ramp_of(v) or {}).get("homes", {}).get("worker-b", {}).get("ramped") == "0.6",
        "worker-b ramped to 0.6 replicas",
    )
    await first.stop()
    await scene.start(with_ramp("0.1"))
    last = await scene.until_weights((1, 1))
    await history.stop_after(last)
    steps = [f"{n / 5:g}" for n in range(0, 11)]  # 0, 0.2, ..., 2
    # (the status write of the drop may come after the watch starts: worker-b still at 0)
    assert [r for r in ramped_of_b(history.versions) if r != "0"] == steps[1:]
    final = ramp_of(last)
    assert final is not None
    assert final["maxIncreasePerPeriod"] == "0.1"
    assert final["homes"]["worker-b"] == {
        "target": 1, "weight": 1, "capacity": "2", "ramped": "2", "periodsLeft": 0
    }  # fmt: skip


async def test_the_annotation_wins_and_taking_it_away_publishes_the_targets_at_once(
    scene: Scene,
) -> None:
    """The chart has no ramp, the service's annotation asks for one (0.1, ten steps); once
    it is removed, the map's annotation goes and the weights are the targets at once."""
    await scene.route({MAX_INCREASE: "0.1"})
    await scene.start(ROUTING_ON)
    await scene.until_weights((1, 1))
    history = await scene.lose_and_recover_worker_b()
    ramping = await history.until(
        lambda v: weights(v) not in ((1, 0), (1, 1)), "a ramped step of worker-b"
    )
    assert (ramp_of(ramping) or {})["homes"]["worker-b"]["periodsLeft"] > 0
    await kubectl(scene.plane, "annotate", "isvc", NAME, "-n", scene.namespace, f"{MAX_INCREASE}-")
    off = await history.until(lambda v: ramp_of(v) is None, "the annotation removed")
    assert weights(off) == (1, 1)
    await history.cancel()


async def test_a_bad_annotation_is_logged_once_and_the_service_does_not_ramp(
    scene: Scene,
) -> None:
    """Even with the chart's ramp set: the service's bad value turns it off for the service."""
    await scene.route({MAX_INCREASE: "fast"})
    process = await scene.start(with_ramp("0.25"))
    await scene.until_weights((1, 1))
    history = await scene.lose_and_recover_worker_b()
    back = await history.until(lambda v: weights(v) == (1, 1), "worker-b back")
    assert next(weights(v) for v in history.versions if weights(v) != (1, 0)) == (1, 1)
    assert "annotations" not in back["metadata"]
    await history.cancel()
    message = (
        f'{MAX_INCREASE} ("fast") must be a decimal fraction in (0, 1], such as "0.25"; '
        "the ramp is off for this InferenceService"
    )
    # the replica that holds the service (sharded: a replica that held it before logs it too)
    logged = (await process.owner(scene.namespace, NAME)).log
    # once a tenure: a replica that lost the shard (stalled past the renew deadline) and
    # took it again had let its state of the service go, and logs it again
    tenures = tenures_of(logged, shard_of(scene.namespace, NAME, SHARDS)) if process.sharded else 1
    assert logged.count(message) == tenures, logged


def tenures_of(log: str, shard: int) -> int:
    """How many times the log says its replica acquired `shard`."""
    return sum(1 for fields in log_fields(log, "acquired shard") if fields["shard"] == shard)
