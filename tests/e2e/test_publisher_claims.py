"""OME's checks before the publisher claims a route, on a real API server.

- a map whose journal holds another publisher's claims is `PublisherChanged`, and its
  route is left as it is;
- a target that another map already claims is `ClaimRejected`, until that map goes;
- while any InferenceService keeps the legacy endpoint finalizer, maps not yet
  published by us are `LegacyLifecycleActive`; a map already published keeps publishing.
"""

from __future__ import annotations

import json

import pytest
import yaml
from controller_harness import condition, eventually, get_map
from publisher_harness import Scene, gateway_api, scene, values

__all__ = ["gateway_api", "scene"]  # fixtures

pytestmark = pytest.mark.timeout(240)

LEGACY = "ome.io/placement-endpoint"


def fast_resync() -> dict[str, object]:
    block = values()
    block["ome"]["multicluster"]["config"]["routing"]["publisher"] = {"resyncInterval": "1s"}
    return block


async def patch_status(scene: Scene, kind: str, name: str, status: dict[str, object]) -> None:
    await scene.kubectl(
        "patch", kind, name, "-n", scene.namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


async def test_claims_of_another_publisher_are_not_taken_over(scene: Scene) -> None:
    ns = scene.namespace
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    first = await scene.start(values())
    await scene.published("chat")
    await first.stop()
    await patch_status(scene, "trafficmap", "chat", {"publisher": {"publisherName": "istio"}})

    process = await scene.start(values())
    tmap = await scene.published("chat", "PublisherChanged")
    published = condition(tmap, "Published")
    assert (published["status"], published["message"]) == (
        "False",
        "Publisher journal does not match the selected publisher",
    )
    assert tmap["status"]["publisher"] == {
        "publisherName": "istio",
        "claimedTargets": [f"v1:httproute:{ns}/chat-global"],
        "observedOptionsDigest": tmap["status"]["publisher"]["observedOptionsDigest"],
    }
    # the log's fields are JSON, so the quotes are escaped
    assert (
        'TrafficMap publisher changed while claims remain: from \\"istio\\" to \\"gatewayapi\\"'
    ) in process.log
    await scene.place("chat", {"worker-a": 1, "worker-b": 1})
    route = await scene.get("httproute", "chat-global")
    assert route is not None
    assert [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]] == [2, 1]

    # deleting the map: another publisher's targets are not removed, nor its finalizer
    refusals = process.log.count("TrafficMap publisher changed while claims remain")
    await scene.kubectl("delete", "trafficmap", "chat", "-n", ns, "--wait=false")

    async def refused_again() -> bool:
        return process.log.count("TrafficMap publisher changed while claims remain") > refusals

    await eventually(refused_again, what="the finalization to be refused")
    await scene.published("chat", "PublisherChanged")
    assert await scene.get("httproute", "chat-global") is not None
    held = await get_map(scene.plane, "chat", ns)
    assert held is not None and "ome.io/trafficmap-publisher" in held["metadata"]["finalizers"]
    await scene.kubectl(
        "patch", "trafficmap", "chat", "-n", ns, "--type=merge",
        "-p", '{"metadata":{"finalizers":null}}',
    )  # fmt: skip


async def test_a_route_claimed_by_another_map_is_refused_until_that_map_goes(
    scene: Scene,
) -> None:
    ns = scene.namespace
    target = f"v1:httproute:{ns}/chat-global"
    orphan = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "orphan", "namespace": ns},
        "spec": {"service": "orphan"},
    }
    await scene.kubectl("apply", "-f", "-", input=yaml.safe_dump(orphan))
    await patch_status(
        scene,
        "trafficmap",
        "orphan",
        {"publisher": {"publisherName": "gatewayapi", "claimedTargets": [target]}},
    )
    await scene.service("chat", {"worker-a": 1})
    process = await scene.start(fast_resync())
    tmap = await scene.published("chat", "ClaimRejected")
    assert condition(tmap, "Published")["message"] == "Publisher claims could not be acquired"
    assert "publisher" not in tmap["status"]  # nothing claimed
    assert await scene.get("httproute", "chat-global") is None
    assert (
        f'publisher target \\"{target}\\" is already claimed by TrafficMap {ns}/orphan'
    ) in process.log

    await scene.kubectl("delete", "trafficmap", "orphan", "-n", ns)
    await scene.published("chat")  # at the next resync
    assert await scene.get("httproute", "chat-global") is not None


async def test_a_legacy_endpoint_finalizer_holds_back_first_publications(scene: Scene) -> None:
    ns = scene.namespace
    await scene.service("first", {"worker-a": 1})
    process = await scene.start(fast_resync())
    await scene.published("first")
    legacy = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "old", "namespace": ns, "finalizers": [LEGACY]},
        "spec": {"model": {"name": "old"}},
    }
    await scene.kubectl("apply", "-f", "-", input=yaml.safe_dump(legacy))

    await scene.service("chat", {"worker-a": 1})
    tmap = await scene.published("chat", "LegacyLifecycleActive")
    assert (
        condition(tmap, "Published")["message"] == "Legacy endpoint publisher cleanup is incomplete"
    )
    assert await scene.get("httproute", "chat-global") is None
    assert (
        "1 InferenceService(s) retain the legacy endpoint publisher finalizer; complete their "
        "cleanup before publishing TrafficMaps"
    ) in process.log
    # a map the publisher already published keeps following its table
    await scene.place("first", {"worker-a": 1, "worker-b": 1})
    await scene.weights("first", [1, 1])

    await scene.kubectl(
        "patch", "inferenceservice", "old", "-n", ns, "--type=merge",
        "-p", '{"metadata":{"finalizers":null}}',
    )  # fmt: skip
    await scene.published("chat")
