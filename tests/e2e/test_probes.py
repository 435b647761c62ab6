"""The guide "Configure routing health probes" on a real API server, with the real kubectl.

Each home is the reference reporter with its health stand-in (`reporter.health`): a
`/v1/models` whose answer a test switches while the controller runs. The probes are the
guide's, made fast (period 1s, timeout 500ms) so that a gate closes in about 3 seconds.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    ControllerProcess,
    condition,
    counted,
    entry,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)
from lightkube import AsyncClient
from map_watch import MapHistory, resource_version, settled
from tests.probe_spec import guide_probe

from ome_routing.reporter.health import SwitchableHealth, add_health_route
from ome_routing.reporter.server import StaticCount, make_app
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(240)

#: The guide's chart probe, fast.
PROBE: dict[str, Any] = guide_probe(period="1s", timeout="500ms")
#: The guide's Step 2 probe (allFailedPolicy Drain), fast.
DRAIN_PROBE = {**PROBE, "allFailedPolicy": "Drain"}
STEP_3 = (
    "-o",
    'jsonpath={range .spec.entries[*]}{.cluster}{" "}{.weight}{" "}{.healthy}{" "}'
    '{.probe.result}{" "}{.probe.message}{"\\n"}{end}',
)
ROUTABLE = (
    "-o",
    'custom-columns=ROUTABLE:.status.conditions[?(@.type=="Routable")].status,'
    'REASON:.status.conditions[?(@.type=="Routable")].reason,'
    'MESSAGE:.status.conditions[?(@.type=="Routable")].message',
)


def values(probe: dict[str, Any] | None = PROBE, **observer: Any) -> dict[str, Any]:
    config = copy.deepcopy(ROUTING_ON)
    routing = config["ome"]["multicluster"]["config"]["routing"]
    if probe is not None:
        routing["probe"] = probe
    if observer:
        routing["observer"] = observer
    return config


@dataclass
class Home:
    """A workload cluster's model server: a capacity report and a switchable health path."""

    servable: int = 2
    health: SwitchableHealth = field(default_factory=SwitchableHealth)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> Home:
        app = make_app(_Servable(self))
        add_health_route(app, self.health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@dataclass
class _Servable:
    home: Home

    def read(self) -> Any:
        return StaticCount(self.home.servable).read()


@dataclass
class Scene:
    plane: LocalControlPlane
    kubeconfig: Path
    workdir: Path
    namespace: str
    homes: dict[str, Home]
    controllers: list[ControllerProcess]
    client: AsyncClient

    async def route(
        self, name: str = "svc", capacity: dict[str, Any] | None = None, **routing: Any
    ) -> None:
        manifest = isvc_manifest(name, self.namespace, capacity, **routing)
        await kubectl(self.plane, "apply", "-f", "-", input=manifest)
        await place(self.plane, name, self.namespace, {c: h.url for c, h in self.homes.items()})

    async def start(self, config: dict[str, Any]) -> ControllerProcess:
        process = ControllerProcess(
            self.kubeconfig, config, self.workdir, lease=f"lease-{uuid.uuid4().hex[:8]}"
        )
        self.controllers.append(process.start())
        await process.wait_started()
        return process

    async def map(self, name: str = "svc") -> dict[str, Any] | None:
        return await get_map(self.plane, name, self.namespace)

    async def settled_map(self, name: str = "svc") -> dict[str, Any]:
        """The map once its status describes its spec (the status is the second write)."""

        async def seen() -> dict[str, Any] | None:
            tmap = await self.map(name)
            return tmap if settled(tmap) else None

        return await eventually(seen, what=f"{name}'s status to follow its spec")

    async def get(self, *output: str, name: str = "svc") -> str:
        result = await kubectl(self.plane, "get", "trafficmap", name, "-n", self.namespace, *output)
        return result.stdout

    async def until_output(self, expected: str, *output: str, name: str = "svc") -> str:
        async def seen() -> str | None:
            text = await self.get(*output, name=name)
            return text if text == expected else None

        return await eventually(seen, what=repr(expected))

    async def until_probe(self, cluster: str, check: Any, name: str = "svc") -> dict[str, Any]:
        async def seen() -> dict[str, Any] | None:
            tmap = await self.map(name)
            if tmap is None or not tmap.get("spec", {}).get("entries"):
                return None
            probe = entry(tmap, cluster).get("probe")
            return tmap if probe is not None and check(probe) else None

        return await eventually(seen, what=f"{cluster}'s probe")


@pytest.fixture
async def homes() -> AsyncIterator[dict[str, Home]]:
    started = {"worker-a": await Home().start(), "worker-b": await Home().start()}
    try:
        yield started
    finally:
        for home in started.values():
            await home.stop()


@pytest.fixture
async def scene(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
    homes: dict[str, Home],
    kube_client: AsyncClient,
) -> AsyncIterator[Scene]:
    running: list[ControllerProcess] = []
    try:
        yield Scene(control_plane, kubeconfig, tmp_path, namespace, homes, running, kube_client)
    finally:
        for process in running:
            await process.stop()


def gated(probe: dict[str, Any]) -> bool:
    return probe.get("gated") is True


async def test_a_failing_home_is_gated_and_reopens(scene: Scene) -> None:
    """The guide's Step 1 and Step 3: the chart's probe gates worker-b, then lets it back."""
    await scene.route()
    process = await scene.start(values())
    await scene.until_output(
        "worker-a 1 true Passing HTTP 200\nworker-b 1 true Passing HTTP 200\n", *STEP_3
    )
    since = await resource_version(scene.client, scene.namespace, "svc")
    scene.homes["worker-b"].health.switch(503)
    await scene.until_output(
        "worker-a 1 true Passing HTTP 200\nworker-b 0 false Failing HTTP 503\n", *STEP_3
    )
    # probes go on after the gate closes, and count on: look at every version up to the one
    # that closed it, not at whatever a later read finds. A slow write may carry a count
    # past the threshold, but no version may gate before it or stay open at it.
    history = MapHistory(scene.client, scene.namespace, "svc", since)
    try:
        tmap = await history.until(
            lambda version: entry(version, "worker-b")["probe"].get("gated") is True,
            "the version that gated worker-b",
        )
    finally:
        await history.cancel()
    before = history.versions[: history.versions.index(tmap)]
    counts = [entry(v, "worker-b")["probe"].get("consecutiveFailures", 0) for v in before]
    assert all(count < 3 for count in counts), counts
    probe = entry(tmap, "worker-b")["probe"]
    assert probe["gated"] is True and probe["consecutiveFailures"] >= 3
    assert probe["policyDigest"].startswith("sha256:") and "lastProbeTime" in probe
    assert "gated" not in entry(tmap, "worker-a")["probe"]
    # the gauge is set after the status write: wait for it rather than read it once
    line = f'namespace="{scene.namespace}",trafficmap="svc"}} 1.0'

    async def counted() -> bool:
        return line in await process.metric("ome_routing_probe_gated_homes")

    await eventually(counted, what="the gated-homes gauge to count worker-b")
    waits = await process.metric("ome_routing_observer_budget_wait_seconds_count")
    assert 'kind="probe"' in waits

    scene.homes["worker-b"].health.switch(200)
    await scene.until_output(
        "worker-a 1 true Passing HTTP 200\nworker-b 1 true Passing HTTP 200\n", *STEP_3
    )
    assert "gated" not in entry(await scene.map(), "worker-b")["probe"]


async def test_preserve_traffic_keeps_the_weights_and_drain_zeroes_them(scene: Scene) -> None:
    """The guide's "When every cluster fails", with each allFailedPolicy."""
    await scene.route()
    await scene.start(values())
    for home in scene.homes.values():
        home.health.switch(503)
    await scene.until_output(
        "ROUTABLE   REASON                MESSAGE\n"
        "True       AllHomesProbeFailed   2 home(s) have conclusive probe failures; "
        "preserving traffic among homes with ready capacity\n",
        *ROUTABLE,
    )
    assert await scene.get(*STEP_3) == (
        "worker-a 1 false Failing HTTP 503\nworker-b 1 false Failing HTTP 503\n"
    )

    await scene.route(probe=DRAIN_PROBE)  # the service's own probe: a new policy starts over
    await scene.until_output(
        "ROUTABLE   REASON                MESSAGE\n"
        "False      AllHomesProbeFailed   2 home(s) have conclusive probe failures; "
        "all route weights are zero\n",
        *ROUTABLE,
    )
    assert await scene.get(*STEP_3) == (
        "worker-a 0 false Failing HTTP 503\nworker-b 0 false Failing HTTP 503\n"
    )

    await scene.route(probe={"disabled": True})
    await scene.until_output("worker-a 1 true  \nworker-b 1 true  \n", *STEP_3)


async def test_a_ceiling_of_0_beats_preserve_traffic(scene: Scene) -> None:
    scene.homes["worker-a"].servable = 0
    await scene.route(capacity={**FAST_POLL, "quorum": 1})
    await scene.start(values())
    for home in scene.homes.values():
        home.health.switch(503)
    await scene.until_output(
        "worker-a 0 false Failing HTTP 503\nworker-b 1 false Failing HTTP 503\n", *STEP_3
    )
    routable = condition(await scene.settled_map(), "Routable")
    assert (routable["status"], routable["reason"]) == ("True", "AllHomesProbeFailed")


async def test_a_restart_keeps_the_gate(scene: Scene) -> None:
    """Probe state is restored from the map: the gate holds and the failures keep counting."""
    await scene.route()
    first = await scene.start(values())
    scene.homes["worker-b"].health.switch(503)
    await scene.until_probe("worker-b", gated)
    await first.stop()
    before = entry(await scene.map(), "worker-b")["probe"]

    await scene.start(values())

    def moved(probe: dict[str, Any]) -> bool:
        return bool(probe.get("lastProbeTime") != before["lastProbeTime"])

    after = entry(await scene.until_probe("worker-b", moved), "worker-b")["probe"]
    assert after["gated"] is True
    assert after["consecutiveFailures"] > before["consecutiveFailures"]


async def test_a_bad_probe_freezes_only_its_own_map(scene: Scene) -> None:
    """The guide's "The TrafficMap doesn't pick up the probe", and a period below minPeriod."""
    await scene.route("overlap")
    await scene.route("fast")
    await scene.route("healthy")
    process = await scene.start(values(minPeriod="1s"))
    for name in ("overlap", "fast", "healthy"):
        await scene.until_probe("worker-a", lambda probe: True, name=name)

    await scene.route("overlap", probe={**PROBE, "acceptStatuses": [200, 503]})
    await scene.route("fast", probe={**PROBE, "period": "500ms", "timeout": "100ms"})

    for name in ("overlap", "fast"):

        async def invalid_owner(name: str = name) -> dict[str, Any] | None:
            tmap = await scene.map(name)
            published = condition(tmap, "Published")
            return tmap if published["reason"] == "InvalidOwner" else None

        await eventually(invalid_owner, what=f"{name}: Published InvalidOwner")
    assert (
        "validate routing policy: spec.routing.probe status 503 is in both acceptStatuses "
        "and gateStatuses" in process.log
    )
    assert (
        "resolve probe policy: spec.routing.probe.period (500ms) must be at least "
        "routing.observer.minPeriod (1s)" in process.log
    )
    frozen = (await scene.map("overlap"))["spec"]
    # First two more probes of every home of the three services (were the frozen ones
    # still probed, each of their homes would have been probed again, and its map written)
    probed = await counted(process, "ome_routing_health_probes_total")

    async def two_rounds() -> bool:
        return await counted(process, "ome_routing_health_probes_total") >= probed + 2 * 3 * 2

    await eventually(two_rounds, what="twelve more probes: two rounds of six homes")
    assert (await scene.map("overlap"))["spec"] == frozen, "a frozen map is no longer probed"

    scene.homes["worker-b"].health.switch(503)
    await scene.until_probe("worker-b", gated, name="healthy")
