"""The routing controller on a real API server, driven with the real kubectl.

The first test walks through the specification's Steps 2 and 3 and "Turn the poll off" with
the spec's own files and commands; the others cover its troubleshooting cases with a fast
poll (period 1s, quorum 2; maxAge 3s where staleness is tested) so that each takes seconds.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_harness import (
    FAST_POLL,
    ROUTING_ON,
    STALE_IN_3S,
    ControllerProcess,
    Reporter,
    condition,
    counted,
    delete_namespace,
    entry,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
    unsharded_only,
)
from lightkube import AsyncClient
from map_watch import MapHistory, settled

from ome_routing.core.report import parse_rfc3339
from ome_routing_dev.devcluster import LocalControlPlane

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECONCILES = "ome_routing_trafficmap_reconciles_total"

pytestmark = pytest.mark.timeout(240)

STEP_3_CONDITION = (
    "-o",
    'custom-columns=FALLBACK:.status.conditions[?(@.type=="CapacityFallback")].status,'
    'REASON:.status.conditions[?(@.type=="CapacityFallback")].reason,'
    'MESSAGE:.status.conditions[?(@.type=="CapacityFallback")].message',
)
STEP_3_ENTRIES = (
    "-o",
    'jsonpath={range .spec.entries[*]}{.cluster}{" "}{.weight}{" "}{.capacity.allocated}{" "}'
    '{.capacity.ready}{" "}{.capacity.source}{" "}{.capacity.reported}{"\\n"}{end}',
)
FALLBACK_REASONS = (
    "-o",
    'jsonpath={range .spec.entries[*]}{.cluster}{": "}{.capacity.fallbackReason}{"\\n"}{end}',
)


@dataclass
class Scene:
    """One test's world: the control plane, its namespace, two reporters, the controllers."""

    plane: LocalControlPlane
    kubeconfig: Path
    workdir: Path
    namespace: str
    reporters: dict[str, Reporter]
    controllers: list[ControllerProcess]

    async def route(self, name: str = "svc", **poll: Any) -> None:
        """A routed service with the fast poll (changed by `poll`), placed on both reporters."""
        manifest = isvc_manifest(name, self.namespace, {**FAST_POLL, **poll})
        await kubectl(self.plane, "apply", "-f", "-", input=manifest)
        await place(self.plane, name, self.namespace, {c: r.url for c, r in self.reporters.items()})

    async def start(
        self, config: dict[str, Any] | Path = ROUTING_ON, *, lease: str | None = None
    ) -> ControllerProcess:
        process = ControllerProcess(
            self.kubeconfig, config, self.workdir, lease=lease or f"lease-{uuid.uuid4().hex[:8]}"
        )
        self.controllers.append(process.start())
        await process.wait_started()
        return process

    async def converged(
        self, name: str = "svc", **poll: Any
    ) -> tuple[ControllerProcess, dict[str, Any]]:
        """Route a service (its poll changed by `poll`), start a controller, and wait for
        both ceilings."""
        await self.route(name, **poll)
        process = await self.start()
        return process, await self.until_ceilings(name)

    async def map(self, name: str = "svc") -> dict[str, Any] | None:
        return await get_map(self.plane, name, self.namespace)

    async def kubectl_get_map(self, *output: str, name: str = "svc") -> str:
        result = await kubectl(self.plane, "get", "trafficmap", name, "-n", self.namespace, *output)
        return result.stdout

    async def until_reason(self, cluster: str, reason: str, name: str = "svc") -> dict[str, Any]:
        async def seen() -> dict[str, Any] | None:
            tmap = await self.map(name)
            if tmap is None:
                return None
            found = entry(tmap, cluster)["capacity"].get("fallbackReason")
            return tmap if found == reason and settled(tmap) else None

        return await eventually(seen, what=f"{cluster}: {reason}")

    async def until_ceilings(self, name: str = "svc") -> dict[str, Any]:
        async def both() -> dict[str, Any] | None:
            tmap = await self.map(name)
            if tmap is None or not tmap["spec"].get("entries"):
                return None
            entries = tmap["spec"]["entries"]
            reported = all("reported" in e["capacity"] for e in entries)
            return tmap if reported and settled(tmap) else None

        return await eventually(both, what="ceilings on every home")


@pytest.fixture
async def reporters() -> AsyncIterator[dict[str, Reporter]]:
    started = {
        "worker-a": await Reporter(servable=3).start(),
        "worker-b": await Reporter(servable=1).start(),
    }
    try:
        yield started
    finally:
        for reporter in started.values():
            await reporter.stop()


@pytest.fixture
async def controllers() -> AsyncIterator[list[ControllerProcess]]:
    """Controllers a test starts; all are stopped at the end."""
    running: list[ControllerProcess] = []
    try:
        yield running
    finally:
        for process in running:
            await process.stop()


@pytest.fixture
def scene(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
) -> Scene:
    return Scene(control_plane, kubeconfig, tmp_path, namespace, reporters, controllers)


async def _answered(reporter: Reporter, polls: int) -> bool:
    return reporter.requests >= polls


async def settled_map(scene: Scene, name: str) -> dict[str, Any] | None:
    tmap = await scene.map(name)
    return tmap if settled(tmap) else None


def spec_written_at(tmap: dict[str, Any]) -> datetime:
    """When the controller last wrote the map's spec, as the API server stamped it."""
    stamps = [
        parse_rfc3339(managed["time"])
        for managed in tmap["metadata"]["managedFields"]
        if managed["manager"] == "ome-routing" and "subresource" not in managed
    ]
    assert stamps, tmap["metadata"]["managedFields"]
    return max(stamps)


async def test_the_specs_steps_2_and_3_and_turning_the_poll_off(
    control_plane: LocalControlPlane,
    kubeconfig: Path,
    tmp_path: Path,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
) -> None:
    namespace = name = "qwen3-0-6b"
    scene = Scene(control_plane, kubeconfig, tmp_path, namespace, reporters, controllers)
    await kubectl(control_plane, "create", "namespace", namespace)
    try:
        applied = await kubectl(control_plane, "apply", "-f", str(EXAMPLES / "isvc.yaml"))
        assert applied.stdout == "inferenceservice.ome.io/qwen3-0-6b created\n"
        await place(control_plane, name, namespace, {c: r.url for c, r in reporters.items()})
        process = await scene.start(EXAMPLES / "values.yaml")

        expected = (
            "FALLBACK   REASON                      MESSAGE\n"
            "False      EndpointCapacityAvailable   endpoint capacity is available for all 2 home(s)\n",
            "worker-a 2 2 2 ControlPlane 3\nworker-b 1 1 2 Endpoint 1\n",
        )

        async def matches() -> bool:
            step_3 = (
                await scene.kubectl_get_map(*STEP_3_CONDITION, name=name),
                await scene.kubectl_get_map(*STEP_3_ENTRIES, name=name),
            )
            return step_3 == expected

        # The service's own poll (period 10s, quorum 3) gives ceilings from the third poll on.
        await eventually(matches, timeout=60, what="the spec's Step 3 output")
        tmap = await eventually(lambda: settled_map(scene, name), what="the status of that spec")
        assert [
            (c["status"], c["reason"], c["message"])
            for c in (condition(tmap, "Routable"), condition(tmap, "OverrideActive"))
        ] == [
            ("True", "Routable", "2 home(s) serving"),
            ("False", "NoOverrides", "no traffic-drain annotation override is configured"),
        ]
        # OME's log lines: what the manager sets up, and each spec it writes
        for line in (
            "Setting up multi-cluster TrafficMap publisher",
            "Setting up multi-cluster TrafficMap routing controller",
            'trafficmap generated\t{"homes": 2, "isvc": "qwen3-0-6b/qwen3-0-6b", "mode": "All", '
            '"op": "created"}',
        ):
            assert line in process.log, line

        # Turn the poll off for this service, whatever the chart sets.
        isvc = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
        isvc["spec"]["routing"]["capacity"] = {"disabled": True}
        off = await kubectl(control_plane, "apply", "-f", "-", input=yaml.safe_dump(isvc))
        assert off.stdout == "inferenceservice.ome.io/qwen3-0-6b configured\n"

        async def disabled() -> dict[str, Any] | None:
            tmap = await scene.map(name)
            found = condition(tmap, "CapacityFallback")
            return tmap if found["reason"] == "CapacityPollingDisabled" and settled(tmap) else None

        tmap = await eventually(disabled, what="CapacityPollingDisabled")
        fallback = condition(tmap, "CapacityFallback")
        assert (fallback["status"], fallback["message"]) == (
            "False",
            "endpoint capacity polling is disabled",
        )
        assert all("reported" not in e["capacity"] for e in tmap["spec"]["entries"])
        polled = {c: r.requests for c, r in reporters.items()}
        # A witness with the old poll (period 10s) on a reporter of its own: a new home is
        # polled at once, so its second poll comes a whole period of the old poll later.
        witness = await Reporter(servable=1).start()
        try:
            old_poll = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())["spec"]["routing"]
            witness_isvc = isvc_manifest("witness", namespace, old_poll["capacity"])
            await kubectl(control_plane, "apply", "-f", "-", input=witness_isvc)
            await place(control_plane, "witness", namespace, {"worker-w": witness.url})
            await eventually(
                lambda: _answered(witness, 2), timeout=90, what="two polls of the witness"
            )
        finally:
            await witness.stop()
        assert {c: r.requests for c, r in reporters.items()} == polled, "homes are still polled"

        # The API server refuses a poll with a missing field, with the spec's message.
        del isvc["spec"]["routing"]["capacity"]
        isvc["spec"]["routing"]["capacity"] = {"path": "/capacity", "method": "GET"}
        refused = await kubectl(
            control_plane, "apply", "-f", "-", input=yaml.safe_dump(isvc), check=False
        )
        assert refused.returncode != 0
        assert (
            "an enabled capacity poll must specify path, method, format, period, timeout, samples, quorum, and maxAge"
            in refused.stderr
        )
    finally:
        await asyncio.to_thread(delete_namespace, control_plane, namespace)


async def test_a_404_reporter_falls_back_and_the_gauge_counts_it(scene: Scene) -> None:
    process, _ = await scene.converged()
    scene.reporters["worker-b"].status = 404
    # waits for the status too, which the controller writes after the spec
    await scene.until_reason("worker-b", "capacity endpoint returned HTTP 404")
    reasons = await scene.kubectl_get_map(*FALLBACK_REASONS)
    assert reasons == "worker-a: \nworker-b: capacity endpoint returned HTTP 404\n"
    cond = await scene.kubectl_get_map(*STEP_3_CONDITION)
    assert cond.splitlines()[1].split(None, 2) == [
        "True",
        "EndpointCapacityUnavailable",
        "1 of 2 home(s) are using control-plane capacity; inspect spec.entries[].capacity.fallbackReason",
    ]
    # the gauge is set after the status write: wait for it rather than read it once
    line = f'ome_trafficmap_capacity_fallback_homes{{namespace="{scene.namespace}",trafficmap="svc"}} 1.0'

    async def counted() -> str | None:
        gauge = await process.metric("ome_trafficmap_capacity_fallback_homes")
        return gauge if line in gauge else None

    await eventually(counted, what="the fallback gauge to count worker-b")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"age": timedelta(minutes=1)},
            "capacity report is stale (at least configured maximum age 3s)",
        ),
        ({"age": -timedelta(minutes=1)}, "capacity report timestamp is in the future"),
        ({"servable": -1}, "capacity report is negative (-1)"),
    ],
    ids=["stale", "future", "negative"],
)
async def test_a_bad_report_removes_the_ceiling_and_keeps_admitted_replicas(
    scene: Scene, change: dict[str, Any], reason: str
) -> None:
    await scene.converged(maxAge=STALE_IN_3S["maxAge"])
    for attr, value in change.items():
        setattr(scene.reporters["worker-b"], attr, value)
    tmap = await scene.until_reason("worker-b", reason)
    capacity = entry(tmap, "worker-b")["capacity"]
    assert (capacity["allocated"], capacity["source"], "reported" in capacity) == (
        2,
        "ControlPlane",
        False,
    )


async def test_a_reporter_that_freezes_loses_its_ceiling_within_max_age(scene: Scene) -> None:
    await scene.converged(maxAge=STALE_IN_3S["maxAge"])
    started = scene.reporters["worker-b"].frozen_at = datetime.now(UTC)

    async def lost() -> dict[str, Any] | None:
        shown = await scene.kubectl_get_map("-o", "json", "--show-managed-fields")
        tmap: dict[str, Any] = json.loads(shown)
        return tmap if "reported" not in entry(tmap, "worker-b")["capacity"] else None

    tmap = await eventually(lost, timeout=60, what="worker-b to lose its ceiling")
    # The last fresh reading ages out at maxAge (3s); the verdict changes then, between
    # polls, or at the next poll (period 1s, timeout 500ms) at the latest. Allow 3s more
    # for the write. The time is the API server's stamp of the controller's last spec write
    # (in whole seconds, so 1s is added), not when this test got to read the map back: on a
    # loaded machine a kubectl call alone can take seconds.
    written = spec_written_at(tmap) + timedelta(seconds=1)
    assert (written - started).total_seconds() < 3 + 1 + 0.5 + 3
    assert entry(tmap, "worker-b")["capacity"]["fallbackReason"].startswith(
        ("capacity report is stale", "capacity report awaiting quorum after stale samples expired")
    )


@pytest.mark.parametrize(
    ("poll", "message"),
    [
        (
            {"samples": 4, "quorum": 3, "period": "10s", "maxAge": "20s"},
            "validate routing policy: spec.routing.capacity.maxAge (20s) must span at least quorum (3) period intervals",
        ),
        (
            {"format": "report"},
            'resolve capacity policy: spec.routing.capacity.format "report" is not registered in this build (available: [Report])',
        ),
        (
            {"period": "500ms", "timeout": "100ms"},
            "resolve capacity policy: spec.routing.capacity.period (500ms) must be at least routing.observer.minPeriod (1s)",
        ),
        (
            {"samples": 200},
            "resolve capacity policy: spec.routing.capacity.samples (200) must not exceed routing.observer.maxSamples (100)",
        ),
    ],
    ids=["maxAge", "format", "minPeriod", "maxSamples"],
)
async def test_a_policy_mistake_freezes_only_its_own_map(
    scene: Scene, poll: dict[str, Any], message: str
) -> None:
    await scene.route("broken")
    await scene.route("healthy")
    process = await scene.start()
    before = await scene.until_ceilings("broken")
    await scene.until_ceilings("healthy")

    await scene.route("broken", **poll)

    async def frozen() -> dict[str, Any] | None:
        tmap = await scene.map("broken")
        published = condition(tmap, "Published")
        return tmap if published["reason"] == "InvalidOwner" else None

    tmap = await eventually(frozen, what="Published InvalidOwner")
    published = condition(tmap, "Published")
    assert (published["status"], published["message"]) == (
        "False",
        "TrafficMap owner identity is invalid or stale",
    )
    assert tmap["spec"]["entries"] == before["spec"]["entries"], "a frozen map keeps its last table"
    # OME's `Reconciler error` line carries the error as a JSON field, quotes escaped
    assert json.dumps(message)[1:-1] in process.log
    polled = scene.reporters["worker-a"].requests
    # The healthy service keeps working: its homes are polled, and a change reaches its map.
    scene.reporters["worker-a"].servable = 1

    async def healthy_follows() -> bool:
        tmap = await scene.map("healthy")
        return entry(tmap, "worker-a")["capacity"].get("reported") == 1

    await eventually(healthy_follows, what="the healthy map to follow its reporter")
    assert scene.reporters["worker-a"].requests > polled
    frozen_now = await scene.map("broken")
    assert frozen_now is not None and frozen_now["spec"]["entries"] == before["spec"]["entries"]


async def test_a_malformed_drain_annotation_alone_leaves_the_map_and_published_as_they_were(
    scene: Scene,
) -> None:
    """No new generation of the service: OME writes nothing, and its publisher's owner
    check still holds, so `Published` and the published table stay."""
    await scene.route("witness")  # a routed service on the same reporters
    process, _ = await scene.converged()
    before = await eventually(lambda: settled_published(scene), what="Published recorded")
    await kubectl(
        scene.plane, "annotate", "inferenceservice", "svc", "-n", scene.namespace,
        "ome.io/traffic-drain=not json",
    )  # fmt: skip

    async def logged() -> bool:
        return "parse ome.io/traffic-drain: " in process.log

    await eventually(logged, what="the drain annotation's error in the log")
    scene.reporters["worker-a"].servable = 1  # a change the frozen map must not follow

    # First what shows the change was there to follow: the witness's map follows it, and
    # the frozen service is reconciled twice more after that (its retries count as
    # "frozen"), each pass one that would have written the change.
    async def witness_follows() -> bool:
        tmap = await scene.map("witness")
        return entry(tmap, "worker-a")["capacity"].get("reported") == 1

    await eventually(witness_follows, what="the witness's map to follow worker-a")
    frozen = await counted(process, RECONCILES, result="frozen")

    async def reconciled_twice() -> bool:
        return await counted(process, RECONCILES, result="frozen") >= frozen + 2

    await eventually(reconciled_twice, what="two more reconciles of the frozen service")
    after = await scene.map()
    assert after is not None
    assert after["spec"] == before["spec"]
    assert condition(after, "Published") == condition(before, "Published")


async def settled_published(scene: Scene) -> dict[str, Any] | None:
    tmap = await scene.map()
    if not settled(tmap) or tmap is None:
        return None
    published = [c for c in tmap["status"]["conditions"] if c["type"] == "Published"]
    return tmap if published else None


async def test_routing_enabled_false_deletes_the_map(scene: Scene) -> None:
    await scene.converged()
    manifest = isvc_manifest("svc", scene.namespace, None, enabled=False)
    await kubectl(scene.plane, "apply", "-f", "-", input=manifest)

    async def gone() -> bool:
        return await scene.map() is None

    await eventually(gone, what="the map to be deleted")


async def test_a_hand_edit_of_the_map_is_undone(scene: Scene) -> None:
    process, tmap = await scene.converged()
    edited = [dict(e, weight=999) for e in tmap["spec"]["entries"]]
    patch = json.dumps({"spec": {"entries": edited}})
    await kubectl(
        scene.plane,
        "patch",
        "trafficmap",
        "svc",
        "-n",
        scene.namespace,
        "--type=merge",
        "-p",
        patch,
    )

    async def restored() -> bool:
        now = await scene.map()
        return now is not None and now["spec"]["entries"] == tmap["spec"]["entries"]

    await eventually(restored, what="the hand edit to be undone")

    # the counter goes up once the API server has answered the write, after the map shows it
    async def counted() -> bool:
        return 'kind="spec"' in await process.metric("ome_routing_trafficmap_writes_total")

    await eventually(counted, what="the spec write to be counted")


async def test_a_map_of_the_same_name_owned_by_something_else_is_left_alone(scene: Scene) -> None:
    foreign = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "svc", "namespace": scene.namespace},
        "spec": {"service": "svc", "entries": [{"cluster": "elsewhere", "weight": 7}]},
    }
    await kubectl(scene.plane, "apply", "-f", "-", input=yaml.safe_dump(foreign))
    await scene.route()
    uid = (
        await kubectl(
            scene.plane,
            "get",
            "isvc",
            "svc",
            "-n",
            scene.namespace,
            "-o",
            "jsonpath={.metadata.uid}",
        )
    ).stdout
    process = await scene.start()
    line = (
        f"TrafficMap {scene.namespace}/svc exists but is not controlled by "
        f'InferenceService UID \\"{uid}\\"'
    )  # the `Reconciler error` line's error field is JSON: quotes escaped

    async def logged() -> bool:
        return line in process.log

    await eventually(logged, what="the not-controlled log line")
    tmap = await scene.map()
    assert tmap is not None and tmap["spec"]["entries"] == [{"cluster": "elsewhere", "weight": 7}]
    assert scene.reporters["worker-a"].requests == 0, (
        "a map we do not own must not have its homes polled"
    )


async def test_a_controller_restart_starts_every_home_over(
    scene: Scene, kube_client: AsyncClient
) -> None:
    await scene.route()
    first = await scene.start(lease="restart")
    await scene.until_ceilings()
    await first.stop()
    stopped = await scene.map()
    assert stopped is not None
    since = stopped["metadata"]["resourceVersion"]
    generation = stopped["metadata"]["generation"]

    def rewritten_with_ceilings(tmap: dict[str, Any]) -> bool:
        # a new spec (the publisher's status writes keep the old one), with every ceiling
        newer = tmap["metadata"]["generation"] > generation
        return newer and all("reported" in e["capacity"] for e in tmap["spec"]["entries"])

    history = MapHistory(kube_client, scene.namespace, "svc", since)
    try:
        await scene.start(lease="restart")
        # the map shows the first run's ceilings until the second run writes its spec: wait
        # for ceilings the second run wrote, not for the ones still there
        await history.until(rewritten_with_ceilings, "ceilings written after the restart")
    finally:
        await history.cancel()
    seen: list[str] = []
    for tmap in history.versions:
        reason = entry(tmap, "worker-a")["capacity"].get("fallbackReason")
        if reason and (not seen or seen[-1] != reason):
            seen.append(reason)
    assert seen, (
        "after a restart a home must start over without a ceiling; written: "
        f"{[entry(v, 'worker-a')['capacity'] for v in history.versions]}"
    )
    assert set(seen) <= {
        "no capacity report yet",
        "capacity report awaiting quorum (1/2 accepted samples)",
    }


@unsharded_only("a leader and a standby on one Lease: leader election, which sharding replaces")
async def test_only_the_leader_polls_and_a_standby_takes_over(scene: Scene) -> None:
    await scene.route()
    leader = await scene.start(lease="pair")
    standby = ControllerProcess(
        scene.kubeconfig, ROUTING_ON, scene.workdir, lease="pair", identity="standby"
    )
    scene.controllers.append(standby.start())
    await scene.until_ceilings()

    # a standby serves its metrics once it has read its config; a fixed sleep may end first
    async def serving() -> bool:
        return "serving /metrics" in standby.log

    await eventually(serving, 60, "the standby to serve its metrics")
    assert "ome_routing_leader 1.0" in await leader.metric("ome_routing_leader")
    assert "ome_routing_leader 0.0" in await standby.metric("ome_routing_leader")
    assert "controller started" not in standby.log

    await leader.stop()
    await standby.wait_started(timeout=60)
    scene.reporters["worker-a"].servable = 1

    async def follows() -> bool:
        tmap = await scene.map()
        return entry(tmap, "worker-a")["capacity"].get("reported") == 1

    await eventually(follows, what="the new leader to update the map")


async def test_an_unusable_config_stops_the_controller_with_the_specs_message(
    kubeconfig: Path, tmp_path: Path
) -> None:
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    values["ome"]["multicluster"]["config"]["routing"]["capacity"]["period"] = "10"
    process = ControllerProcess(kubeconfig, values, tmp_path, lease="bad-config").start()
    assert await process.wait_exit() == 1
    assert (
        'invalid multi-cluster configuration: routing.capacity.period: "10" is not a duration (use forms like "30s", "5m")'
        in process.log
    )


async def annotate_drain(scene: Scene, value: str | None, name: str = "svc") -> None:
    """Set (or, with None, remove) the service's ome.io/traffic-drain annotation."""
    setting = "ome.io/traffic-drain-" if value is None else f"ome.io/traffic-drain={value}"
    await kubectl(
        scene.plane, "annotate", "--overwrite", "isvc", name, "-n", scene.namespace, setting
    )


async def test_an_override_id_that_is_no_dns_name_is_applied_as_in_ome(scene: Scene) -> None:
    await scene.converged()
    await annotate_drain(scene, '{"Maint 1":{"cluster":"worker-b","reason":"disk swap"}}')

    async def drained() -> dict[str, Any] | None:
        # the spec and the status are two writes: wait for both
        tmap = await scene.map()
        held = entry(tmap, "worker-b").get("drainRefs") == ["Maint 1"]
        return tmap if held and condition(tmap, "OverrideActive")["status"] == "True" else None

    tmap = await eventually(drained, what="worker-b held by the override")
    assert [(e["cluster"], e["weight"]) for e in tmap["spec"]["entries"]] == [
        ("worker-a", 2),
        ("worker-b", 0),
    ]
    override = condition(tmap, "OverrideActive")
    assert (override["status"], override["reason"], override["message"]) == (
        "True",
        "OverridesApplied",
        "1 of 1 traffic-drain annotation override(s) active across 1 route arm(s); "
        "inspect spec.entries[].drainRefs",
    )
    assert condition(tmap, "Routable")["message"] == "2 home(s) serving"


async def test_a_drain_error_is_reported_before_a_capacity_resolution_error(scene: Scene) -> None:
    """OME parses the drain annotation before it resolves the capacity policy; an empty
    annotation is malformed; and a new service with an error gets no map."""
    await scene.route(samples=200)
    await annotate_drain(scene, "")
    process = await scene.start()
    drain_error = "parse ome.io/traffic-drain: decode top-level object: EOF"
    resolve_error = (
        "resolve capacity policy: spec.routing.capacity.samples (200) "
        "must not exceed routing.observer.maxSamples (100)"
    )

    async def logged(line: str) -> bool:
        return line in process.log

    await eventually(lambda: logged(drain_error), what="the drain error in the log")
    assert resolve_error not in process.log
    assert await scene.map() is None, "a service with an error gets no map"

    await annotate_drain(scene, None)
    await eventually(lambda: logged(resolve_error), what="the resolution error in the log")
    assert await scene.map() is None


async def test_a_policy_error_beats_a_map_of_the_same_name_owned_by_something_else(
    scene: Scene,
) -> None:
    foreign = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "svc", "namespace": scene.namespace},
        "spec": {"service": "svc", "entries": [{"cluster": "elsewhere", "weight": 7}]},
    }
    await kubectl(scene.plane, "apply", "-f", "-", input=yaml.safe_dump(foreign))
    await scene.route(samples=200)
    process = await scene.start()
    resolve_error = (
        "resolve capacity policy: spec.routing.capacity.samples (200) "
        "must not exceed routing.observer.maxSamples (100)"
    )

    async def logged() -> bool:
        return resolve_error in process.log

    await eventually(logged, what="the resolution error in the log")
    assert "exists but is not controlled by" not in process.log
    tmap = await scene.map()
    assert tmap is not None
    # the routing controller writes nothing to a foreign map (OME's publisher, like ours,
    # may mark it `Published` False `InvalidOwner`: it has no InferenceService controller)
    status = tmap.get("status") or {}
    routing = [c for c in status.get("conditions") or [] if c["type"] != "Published"]
    routing = [c for c in routing if c["type"] != "PublicationFallback"]
    assert "sourceUID" not in status and routing == [], "nothing of routing's on a foreign map"


async def test_a_service_that_is_no_longer_placed_loses_its_entries(scene: Scene) -> None:
    await scene.converged()
    await kubectl(
        scene.plane,
        "patch",
        "inferenceservice",
        "svc",
        "-n",
        scene.namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"placement": {"phase": "Placing"}}}),
    )

    async def emptied() -> dict[str, Any] | None:
        tmap = await scene.map()
        if tmap is None or "entries" in tmap["spec"]:
            return None
        # the spec and the status are two writes: wait for both
        return tmap if condition(tmap, "Routable")["reason"] == "NotPlaced" else None

    tmap = await eventually(emptied, what="the table to be left out")
    assert tmap["spec"]["mode"] == "All"
    assert [
        (c["status"], c["reason"], c["message"])
        for c in (condition(tmap, "Routable"), condition(tmap, "CapacityFallback"))
    ] == [
        ("False", "NotPlaced", "InferenceService is not Placed; no homes to route to yet"),
        ("False", "NoCapacityTargets", "no addressable homes require endpoint capacity"),
    ]


async def open_watches(plane: LocalControlPlane) -> dict[str, float]:
    """resource -> the watches the API server is serving now (`apiserver_longrunning_requests`)."""
    metrics = (await kubectl(plane, "get", "--raw", "/metrics")).stdout
    watches: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line:
            labels, value = line.rsplit(" ", 1)
            resource = labels.split('resource="', 1)[1].split('"', 1)[0]
            watches[resource] = watches.get(resource, 0.0) + float(value)
    return watches


async def test_the_controller_and_the_publisher_share_one_watch_of_maps_and_services(
    scene: Scene,
) -> None:
    """Both reconcilers read every map and service: one watch (and cache) each, not two."""
    await scene.route()
    before = await open_watches(scene.plane)
    process = await scene.start()

    async def both_started() -> bool:
        return "TrafficMap publisher started" in process.log

    await eventually(both_started, what="the publisher started")
    await scene.until_ceilings()
    after = await open_watches(scene.plane)
    processes = len(process.replicas)  # sharded: each replica has its own
    for resource in ("trafficmaps", "inferenceservices"):
        opened = after.get(resource, 0.0) - before.get(resource, 0.0)
        assert opened == processes, f"{resource}: {opened:g} watches opened by {processes}"
    # as OME's routing controller, it never reads WorkloadClusters
    opened = after.get("workloadclusters", 0.0) - before.get("workloadclusters", 0.0)
    assert opened == 0, f"workloadclusters: {opened:g} watches opened"
