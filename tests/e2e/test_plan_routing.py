"""Routing by OME's accepted placement plan, on a real API server with the real controller.

The placement status is written as OME's placement controller writes it (a plan with its
mode, winner and single move, an allocation on each candidate). Each rule is shown end to
end: the homes routed, their weights, the plan's ID on the map, and which reporters are
polled at all (the same homes are polled and probed). The Single move restarts the
controller half-way, and OME's snapshot fence is shown against a stale cache.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    ControllerProcess,
    Reporter,
    condition,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
)
from lightkube import AsyncClient
from map_watch import settled

from ome_routing.core.config import config_from_values
from ome_routing.kube.caches import SharedCaches
from ome_routing.kube.controller import Controller, StaleSnapshot
from ome_routing.metrics import RoutingMetrics
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(240)

CLUSTERS = ("worker-a", "worker-b", "worker-c")


def a_candidate(cluster: str, url: str, **allocation: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "cluster": cluster,
        "phase": "Admitted",
        "endpoint": url,
        "admittedReplicas": 2,
        "readyReplicas": 2,
        "allocation": {"currentReplicas": 2, "desiredReplicas": 2} | allocation,
    }
    return candidate


def a_plan(mode: str, revision: int = 1, **fields: Any) -> dict[str, Any]:
    return {"id": f"plan-{revision}", "revision": revision, "mode": mode} | fields


class Plans:
    """One namespace, three reporters, a service in `mode`, and the controller."""

    def __init__(
        self,
        plane: LocalControlPlane,
        kubeconfig: Path,
        workdir: Path,
        namespace: str,
        reporters: dict[str, Reporter],
    ) -> None:
        self.plane, self.kubeconfig, self.workdir = plane, kubeconfig, workdir
        self.namespace, self.reporters = namespace, reporters
        self.controllers: list[ControllerProcess] = []

    async def create(self, mode: str) -> None:
        manifest = isvc_manifest("svc", self.namespace, dict(FAST_POLL))
        manifest = manifest.replace("mode: All", f"mode: {mode}")
        await kubectl(self.plane, "apply", "-f", "-", input=manifest)

    async def place(self, plan: dict[str, Any], *candidates: dict[str, Any]) -> None:
        """Write the placement status OME's placement controller would (a merge patch
        replaces the candidates list whole)."""
        body = {
            "status": {
                "placement": {"phase": "Placed", "plan": plan, "candidates": list(candidates)}
            }
        }
        await kubectl(
            self.plane, "patch", "inferenceservice", "svc", "-n", self.namespace,
            "--subresource=status", "--type=merge", "-p", json.dumps(body),
        )  # fmt: skip

    def candidate(self, cluster: str, **allocation: Any) -> dict[str, Any]:
        return a_candidate(cluster, self.reporters[cluster].url, **allocation)

    async def start(self) -> ControllerProcess:
        process = ControllerProcess(
            self.kubeconfig, ROUTING_ON, self.workdir, lease=f"lease-{uuid.uuid4().hex[:8]}"
        )
        self.controllers.append(process.start())
        await process.wait_started()
        return process

    async def map_where(self, check: Any, what: str, plan_id: str | None = None) -> dict[str, Any]:
        """The settled map once `check(weights)` holds, weights as {cluster: weight}."""

        async def seen() -> dict[str, Any] | None:
            tmap = await get_map(self.plane, "svc", self.namespace)
            if not settled(tmap):
                return None
            assert tmap is not None
            if plan_id is not None and tmap["spec"].get("placementPlanID") != plan_id:
                return None
            weights = {e["cluster"]: e["weight"] for e in tmap["spec"].get("entries") or []}
            return tmap if check(weights) else None

        return await eventually(seen, what=what)


@pytest.fixture
async def plans(
    control_plane: LocalControlPlane, kubeconfig: Path, tmp_path: Path, namespace: str
) -> AsyncIterator[Plans]:
    reporters = {c: await Reporter(servable=2).start() for c in CLUSTERS}
    scene = Plans(control_plane, kubeconfig, tmp_path, namespace, reporters)
    try:
        yield scene
    finally:
        for process in scene.controllers:
            await process.stop()
        for reporter in reporters.values():
            await reporter.stop()


async def test_a_single_race_routes_nobody_until_the_winner_is_committed(plans: Plans) -> None:
    await plans.create("Single")
    racing = [plans.candidate(c, raceCandidate=True) for c in CLUSTERS]
    await plans.place(a_plan("Single", 1), *racing)
    await plans.start()
    tmap = await plans.map_where(lambda w: w == {}, "an empty table while racing", "plan-1")
    assert condition(tmap, "Routable")["reason"] == "NoAddressableHome"
    assert all(r.requests == 0 for r in plans.reporters.values()), "a race candidate was polled"

    await plans.place(a_plan("Single", 2, winner="worker-b"), *racing)
    await plans.map_where(lambda w: list(w) == ["worker-b"], "the winner alone", "plan-2")
    await plans.map_where(lambda w: w == {"worker-b": 1}, "the winner's weight")
    # the winner answers three more polls; the race candidates are asked nothing, ever
    winner = plans.reporters["worker-b"]
    await eventually(_at_least(winner, winner.requests + 3), what="three more polls of worker-b")
    asked = {c: plans.reporters[c].requests for c in ("worker-a", "worker-c")}
    assert asked == {"worker-a": 0, "worker-c": 0}, "a race candidate was polled"


async def test_a_single_move_survives_a_controller_restart(plans: Plans) -> None:
    """Winner a; a move selects b (both serve); the controller stops; the move commits
    while it is down and a is asked to drain; a new controller routes b alone."""
    await plans.create("Single")
    await plans.place(
        a_plan("Single", 1, winner="worker-a", singleMove={"selected": "worker-b"}),
        plans.candidate("worker-a"),
        plans.candidate("worker-b"),
        plans.candidate("worker-c", raceCandidate=True),
    )
    first = await plans.start()
    await plans.map_where(
        lambda w: w == {"worker-a": 1, "worker-b": 1}, "the winner and the move's target"
    )
    await first.stop()

    await plans.place(
        a_plan("Single", 2, winner="worker-b", singleMove={"selected": "worker-b"}),
        plans.candidate("worker-a", drainRequested=True),
        plans.candidate("worker-b"),
        plans.candidate("worker-c", raceCandidate=True),
    )
    await plans.start()
    tmap = await plans.map_where(lambda w: w == {"worker-b": 1}, "the committed handoff", "plan-2")
    assert tmap["spec"]["placementPlanID"] == "plan-2"
    assert condition(tmap, "Routable")["status"] == "True"


async def test_planned_drains_give_weight_zero_and_both_drained_is_no_routable_capacity(
    plans: Plans,
) -> None:
    await plans.create("All")
    a, b = "worker-a", "worker-b"
    await plans.place(a_plan("All", 1), plans.candidate(a), plans.candidate(b))
    await plans.start()
    await plans.map_where(lambda w: w == {a: 1, b: 1}, "both homes at 1")

    await plans.place(a_plan("All", 2), plans.candidate(a, drainRequested=True), plans.candidate(b))
    tmap = await plans.map_where(lambda w: w == {a: 0, b: 1}, "a drained by the plan")
    drained = next(e for e in tmap["spec"]["entries"] if e["cluster"] == a)
    assert drained["healthy"] is True and drained["capacity"]["allocated"] == 2
    assert condition(tmap, "Routable")["reason"] == "Routable"

    await plans.place(
        a_plan("All", 3),
        plans.candidate(a, drainRequested=True),
        plans.candidate(b, drainRequested=True),
    )
    tmap = await plans.map_where(lambda w: w == {a: 0, b: 0}, "both drained by the plan")
    routable = condition(tmap, "Routable")
    assert (routable["status"], routable["reason"], routable["message"]) == (
        "False",
        "NoRoutableCapacity",
        "2 home(s) addressable but none has positive routable capacity; all route weights are zero",
    )


async def test_a_retired_allocation_leaves_the_table_and_is_no_longer_polled(
    plans: Plans,
) -> None:
    await plans.create("Split")
    a, b = "worker-a", "worker-b"
    await plans.place(a_plan("Split", 1), plans.candidate(a), plans.candidate(b))
    await plans.start()
    await plans.map_where(lambda w: w == {a: 1, b: 1}, "both homes")
    retired = plans.candidate(a, currentReplicas=0, desiredReplicas=0)
    await plans.place(a_plan("Split", 2), retired, plans.candidate(b))
    await plans.map_where(lambda w: w == {b: 1}, "a retired")
    before = plans.reporters[a].requests
    # b's reporter answers several more polls; a's is asked nothing more
    target = plans.reporters[b].requests + 3
    await eventually(_at_least(plans.reporters[b], target), what="three more polls of b")
    assert plans.reporters[a].requests == before


def _at_least(reporter: Reporter, count: int) -> Any:
    async def reached() -> bool:
        return reporter.requests >= count

    return reached


async def test_a_stale_cache_never_writes_a_planned_spec(
    plans: Plans, kube_client: AsyncClient
) -> None:
    """OME's fence: before a spec with a plan ID is written, the InferenceService is read
    from the API server; a cache that lags behind it is refused, and nothing is written."""
    await plans.create("All")
    await plans.place(a_plan("All", 1), plans.candidate("worker-a"))
    caches = SharedCaches(kube_client)
    controller = Controller(
        kube_client, config_from_values(ROUTING_ON), RoutingMetrics(), caches=caches
    )
    tasks = [asyncio.create_task(caches.run()), asyncio.create_task(controller.run())]
    try:
        await asyncio.wait_for(controller.synced.wait(), 60)
        key = (plans.namespace, "svc")
        stale = caches.isvcs.cache[key]
        await plans.place(a_plan("All", 2), plans.candidate("worker-b"))
        written = await plans.map_where(lambda w: list(w) == ["worker-b"], "plan-2", "plan-2")
        caches.isvcs.cache[key] = stale  # as if the cache had not seen plan-2 yet
        with pytest.raises(StaleSnapshot, match=r"^placement source or plan changed$"):
            await controller.reconcile(key)
        after = await get_map(plans.plane, "svc", plans.namespace)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_fence_runs_on_every_planned_pass_not_only_on_a_spec_change(
    plans: Plans, kube_client: AsyncClient
) -> None:
    """OME's `apply` fences inside its CreateOrUpdate, so on every pass with a plan ID: a
    snapshot that lags the API server (here a new label, which changes no spec) is
    refused, and neither the spec nor the status is written on that pass. The service is
    not polled, so its spec stays as it is."""
    manifest = isvc_manifest("svc", plans.namespace, {"disabled": True})
    await kubectl(plans.plane, "apply", "-f", "-", input=manifest)
    await plans.place(a_plan("All", 1), plans.candidate("worker-a"))
    caches = SharedCaches(kube_client)
    controller = Controller(
        kube_client, config_from_values(ROUTING_ON), RoutingMetrics(), caches=caches
    )
    tasks = [asyncio.create_task(caches.run()), asyncio.create_task(controller.run())]
    try:
        await asyncio.wait_for(controller.synced.wait(), 60)
        key = (plans.namespace, "svc")
        written = await plans.map_where(lambda w: list(w) == ["worker-a"], "plan-1", "plan-1")
        stale = caches.isvcs.cache[key]
        await kubectl(
            plans.plane, "label", "inferenceservice", "svc", "-n", plans.namespace, "fence=1"
        )

        async def labelled() -> bool:
            labels = (caches.isvcs.cache[key].get("metadata") or {}).get("labels") or {}
            return labels.get("fence") == "1"

        await eventually(labelled, what="the label in the cache")
        caches.isvcs.cache[key] = stale  # as if the cache had not seen the label yet
        # a status the pass would repair, were it not fenced
        routable = dict(condition(written, "Routable"), message="edited by hand")
        await kubectl(
            plans.plane, "patch", "trafficmap", "svc", "-n", plans.namespace,
            "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"conditions": [routable]}}),
        )  # fmt: skip

        async def edited() -> dict[str, Any] | None:
            cached = caches.maps.cache.get(key)
            hit = (
                cached is not None and condition(cached, "Routable")["message"] == "edited by hand"
            )
            return cached if hit else None

        tampered = await eventually(edited, what="the edited status in the cache")
        with pytest.raises(StaleSnapshot, match=r"^placement source or plan changed$"):
            await controller.reconcile(key)
        after = await get_map(plans.plane, "svc", plans.namespace)
        assert after is not None
        assert after["metadata"]["resourceVersion"] == tampered["metadata"]["resourceVersion"]
        assert condition(after, "Routable")["message"] == "edited by hand"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
