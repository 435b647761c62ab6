"""The publisher's optional settings and its refusals, on a real API server.

Backend TLS and `routeNamespace` as the guide's "Optional settings" show them; the
reasons `InvalidPlan`, `InvalidOptions` and `InvalidOwner` with OME's messages; and the
gauge `ome_trafficmap_publication_fallback`.
"""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from controller_harness import ControllerProcess, condition, counted, eventually, get_map
from publisher_harness import Scene, gateway_api, scene, values

from ome_routing.core.publication import backend_service_name

__all__ = ["gateway_api", "scene"]  # fixtures

pytestmark = pytest.mark.timeout(240)

RECONCILES = "ome_routing_trafficmap_reconciles_total"

GUIDE_TLS = (
    "-o",
    'jsonpath={range .items[*]}{.metadata.labels.ome\\.io/placement-cluster}{" "}'
    '{.spec.validation.hostname}{"\\n"}{end}',
)


async def test_backend_tls_writes_a_policy_per_backend_service(scene: Scene) -> None:
    ns = scene.namespace
    await scene.service("chat", {"worker-a": 1, "worker-b": 1})
    backend = {
        "rewriteHostname": True,
        "tls": {"enabled": True, "wellKnownCACertificates": "System"},
    }
    await scene.start(values(backendPort=443, gatewayBackend=backend))
    await scene.published("chat")
    out = await scene.kubectl(
        "get",
        "backendtlspolicies",
        "-n",
        ns,
        "-l",
        "ome.io/placement-endpoint-isvc=chat",
        *GUIDE_TLS,
    )
    assert sorted(out.splitlines()) == [
        f"worker-a chat.{ns}.worker-a.example.com",
        f"worker-b chat.{ns}.worker-b.example.com",
    ]
    name = backend_service_name(ns, "chat", "worker-a")
    policy = await scene.get("backendtlspolicy", name)
    assert policy is not None
    assert policy["spec"]["targetRefs"] == [{"group": "", "kind": "Service", "name": name}]
    assert policy["spec"]["validation"]["wellKnownCACertificates"] == "System"


async def test_a_route_namespace_holds_the_route_under_a_hashed_name(scene: Scene) -> None:
    shared = f"routes-{uuid.uuid4().hex[:6]}"
    await scene.kubectl("create", "namespace", shared)
    try:
        await scene.service("chat", {"worker-a": 1})
        await scene.start(values(routeNamespace=shared))
        tmap = await scene.published("chat")
        ref = tmap["status"]["gatewayRef"]
        assert ref["namespace"] == shared
        assert ref["name"].startswith("chat-") and ref["name"].endswith("-global")
        assert len(ref["name"]) == len("chat-ba4cb5d6-global")
        route = await scene.kubectl("get", "httproute", ref["name"], "-n", shared, "-o", "yaml")
        backend = yaml.safe_load(route)["spec"]["rules"][0]["backendRefs"][0]
        assert backend["namespace"] == shared
        assert backend["name"] == backend_service_name(scene.namespace, "chat", "worker-a")
        assert tmap["status"]["publisher"]["claimedTargets"] == [
            f"v1:httproute:{shared}/{ref['name']}"
        ]
    finally:
        await scene.kubectl("delete", "namespace", shared, "--wait=false", check=False)


async def test_an_invalid_global_host_is_an_invalid_plan(scene: Scene) -> None:
    await scene.service("chat", {"worker-a": 1}, {"ome.io/global-host": "10.1.2.3"})
    process = await scene.start(values(globalHostTemplate=""))
    tmap = await scene.published("chat", "InvalidPlan")
    published = condition(tmap, "Published")
    assert (published["status"], published["message"]) == ("False", "Publisher plan is invalid")
    assert 'global hostname: hostname \\"10.1.2.3\\" must not be an IP address' in process.log
    assert await scene.get("httproute", "chat-global") is None


async def test_per_service_publisher_options_are_refused(scene: Scene) -> None:
    await scene.service("chat", {"worker-a": 1})
    await scene.kubectl(
        "patch", "inferenceservice", "chat", "-n", scene.namespace, "--type=merge",
        "-p", '{"spec": {"routing": {"publisher": {"options": {"zone": "a"}}}}}',
    )  # fmt: skip
    process = await scene.start(values())
    tmap = await scene.published("chat", "InvalidOptions")
    assert condition(tmap, "Published")["message"] == "Publisher options are invalid"
    assert "Gateway API publisher does not accept per-InferenceService options: zone" in process.log


async def until_metric(process: ControllerProcess, line: str) -> None:
    async def shown() -> bool:
        return line in await process.metric("ome_trafficmap_publication_fallback")

    await eventually(shown, what=line)


async def test_a_map_frozen_by_a_spec_error_keeps_its_route_and_reads_invalid_owner(
    scene: Scene,
) -> None:
    """An error in spec.routing is a new generation of the service: routing writes nothing,
    so the map records the older one, and the publisher's owner check gives InvalidOwner;
    the route keeps its last weights."""
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    process = await scene.start(values())
    await scene.published("chat")
    await scene.weights("chat", [2, 1])
    # the publisher sets its gauge after the status write: wait for it, as for the status
    await until_metric(process, 'ome_trafficmap_publication_fallback{namespace="' + scene.namespace)
    bad_poll = {"spec": {"routing": {"capacity": {
        "path": "/capacity", "method": "GET", "format": "Report", "period": "1s",
        "timeout": "500ms", "samples": 200, "quorum": 2, "maxAge": "10s",
    }}}}  # fmt: skip
    await scene.kubectl(
        "patch", "inferenceservice", "chat", "-n", scene.namespace,
        "--type=merge", "-p", json.dumps(bad_poll),
    )  # fmt: skip
    tmap = await scene.published("chat", "InvalidOwner")
    assert (
        condition(tmap, "Published")["message"] == "TrafficMap owner identity is invalid or stale"
    )
    await scene.place("chat", {"worker-a": 1, "worker-b": 1})
    route = await scene.weights("chat", [2, 1])
    assert route["spec"]["rules"][0]["backendRefs"][0]["weight"] == 2
    await until_metric(
        process, f'namespace="{scene.namespace}",publisher="gatewayapi",trafficmap="chat"}} 0.0'
    )
    tmap = await get_map(scene.plane, "chat", scene.namespace)
    assert tmap is not None and tmap["status"]["published"] is True


async def test_a_malformed_drain_annotation_alone_keeps_the_last_table_published(
    scene: Scene,
) -> None:
    """No new generation: OME's publisher still trusts the map, so Published stays True and
    the route keeps the last table, which routing no longer changes."""
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    await scene.service("witness", {"worker-a": 2, "worker-b": 1})
    process = await scene.start(values())
    before = await scene.published("chat")
    await scene.weights("chat", [2, 1])
    await scene.weights("witness", [2, 1])
    await scene.kubectl(
        "annotate", "inferenceservice", "chat", "-n", scene.namespace, "ome.io/traffic-drain=nope"
    )

    async def logged() -> bool:
        return "parse ome.io/traffic-drain: " in process.log

    await eventually(logged, what="the drain annotation's error in the log")
    await scene.place("chat", {"worker-a": 1, "worker-b": 1})
    frozen = await counted(process, RECONCILES, result="frozen")

    # First what shows that the change would have reached the route by now: three more
    # reconciles of the frozen service (each one that would have written it), then the
    # same change to the witness, made after them, reaches the witness's route.
    async def reconciled_thrice() -> bool:
        return await counted(process, RECONCILES, result="frozen") >= frozen + 3

    await eventually(reconciled_thrice, what="three more reconciles of the frozen service")
    await scene.place("witness", {"worker-a": 1, "worker-b": 1})
    await scene.weights("witness", [1, 1])
    route = await scene.get("httproute", "chat-global")
    assert route is not None
    assert [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]] == [2, 1]
    tmap = await get_map(scene.plane, "chat", scene.namespace)
    assert tmap is not None and tmap["status"]["published"] is True
    assert condition(tmap, "Published") == condition(before, "Published")


async def repaired(scene: Scene, edited: int) -> bool:
    """The witness's route was written after the hand edit `edited`, back to its weights."""
    route = await scene.get("httproute", "witness-global")
    if route is None or int(route["metadata"]["resourceVersion"]) <= edited:
        return False
    return [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]] == [2, 1]


async def test_at_rest_nothing_is_written_again_across_resyncs(scene: Scene) -> None:
    block = values()
    block["ome"]["multicluster"]["config"]["routing"]["publisher"] = {"resyncInterval": "1s"}
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    await scene.service("witness", {"worker-a": 2, "worker-b": 1})
    process = await scene.start(block)
    await scene.published("chat")
    await scene.weights("witness", [2, 1])

    async def versions() -> list[str]:
        service = backend_service_name(scene.namespace, "chat", "worker-a")
        found = [
            await scene.get(k, n)
            for k, n in (("httproute", "chat-global"), ("service", service), ("trafficmap", "chat"))
        ]
        return [str(obj["metadata"]["resourceVersion"]) for obj in found if obj is not None]

    before = await versions()
    # First two resyncs seen at work: only a resync repairs a route edited by hand (an
    # edit of a route wakes no reconcile), so the witness's edited route put back twice
    # means two resyncs passed over every map, this one's included.
    for _ in range(2):
        edited = await scene.kubectl(
            "patch", "httproute", "witness-global", "-n", scene.namespace, "--type=json",
            "-p", '[{"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight", "value": 9}]',
            "-o", "jsonpath={.metadata.resourceVersion}",
        )  # fmt: skip
        await eventually(
            lambda version=int(edited): repaired(scene, version), what="the witness route repaired"
        )
    assert await versions() == before
    assert "publish TrafficMap" not in process.log  # no retried failure either


async def test_turning_rewrite_off_removes_the_filters(scene: Scene) -> None:
    await scene.service("chat", {"worker-a": 1})
    first = await scene.start(values())
    await scene.published("chat")
    await first.stop()
    await scene.start(values(gatewayBackend={"rewriteHostname": False}))

    async def no_filters() -> bool:
        route = await scene.get("httproute", "chat-global")
        return route is not None and "filters" not in route["spec"]["rules"][0]["backendRefs"][0]

    await eventually(no_filters, what="the URLRewrite filters to go")


async def test_a_changed_route_namespace_is_refused_until_the_old_route_goes(
    scene: Scene,
) -> None:
    """The guide's warning: the old route keeps its hostname and weights; then it is drained."""
    old_ns, new_ns = (f"routes-{uuid.uuid4().hex[:6]}" for _ in range(2))
    for ns in (old_ns, new_ns):
        await scene.kubectl("create", "namespace", ns)
    try:
        await scene.service("chat", {"worker-a": 2, "worker-b": 1})
        first = await scene.start(values(routeNamespace=old_ns))
        old_route = (await scene.published("chat"))["status"]["gatewayRef"]["name"]
        await first.stop()
        second = await scene.start(values(routeNamespace=new_ns))
        await scene.published("chat", "ClaimRejected")
        assert f"is already published by HTTPRoute {old_ns}/{old_route}" in second.log
        kept = yaml.safe_load(
            await scene.kubectl("get", "httproute", old_route, "-n", old_ns, "-o", "yaml")
        )
        assert [r["weight"] for r in kept["spec"]["rules"][0]["backendRefs"]] == [2, 1]

        await scene.kubectl("delete", "httproute", old_route, "-n", old_ns)
        await scene.kubectl(
            "annotate", "inferenceservice", "chat", "-n", scene.namespace, "retry=1"
        )
        tmap = await scene.published("chat")
        assert sorted(tmap["status"]["publisher"]["claimedTargets"]) == sorted(
            [f"v1:httproute:{old_ns}/{old_route}", f"v1:httproute:{new_ns}/{old_route}"]
        )
    finally:
        for ns in (old_ns, new_ns):
            await scene.kubectl("delete", "namespace", ns, "--wait=false", check=False)
