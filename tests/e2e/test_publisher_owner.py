"""The publisher's owner gates as OME's publisher runs them, on a real API server.

- a routed service whose placement intent OME refuses (an obsolete selector annotation)
  is inactive: `Published` False `Unpublished` in the status, the route left as it was;
- a map that records publisher state but lost its finalizer gets it back before any
  gate, so a service that then stops routing has its map reaped and its route removed;
- a map whose first routing status (its `sourceUID`) is not written is `InvalidOwner`.
"""

from __future__ import annotations

import json

import pytest
import yaml
from controller_harness import condition, eventually, get_map
from publisher_harness import Scene, gateway_api, scene, values

__all__ = ["gateway_api", "scene"]  # fixtures

pytestmark = pytest.mark.timeout(180)

FINALIZER = "ome.io/trafficmap-publisher"


async def test_an_invalid_placement_intent_unpublishes_in_the_status_only(scene: Scene) -> None:
    """OME's `publisherOwnerActive` needs `ValidatePlacementIntent(owner) == nil`; else
    `markInactive` (status only). The routing controller refuses the service too, as a
    `Reconciler error` at each retry, and writes nothing."""
    ns = scene.namespace
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    process = await scene.start(values())
    await scene.published("chat")
    await scene.weights("chat", [2, 1])

    await scene.kubectl(
        "annotate", "inferenceservice", "chat", "-n", ns, "ome.io/cluster-selector=region=west"
    )
    tmap = await scene.published("chat", "Unpublished")
    published, fallback = condition(tmap, "Published"), condition(tmap, "PublicationFallback")
    assert (published["status"], published["message"]) == (
        "False",
        "TrafficMap source is deleting or has opted out of publication",
    )
    assert (fallback["status"], fallback["reason"], fallback["message"]) == (
        "False",
        "Unpublished",
        "TrafficMap publication fallback is inactive",
    )
    assert "published" not in tmap["status"]
    assert tmap["status"]["publisher"]["claimedTargets"] == [f"v1:httproute:{ns}/chat-global"]
    route = await scene.get("httproute", "chat-global")
    assert route is not None, "an inactive owner's route is not withdrawn"
    assert [r["weight"] for r in route["spec"]["rules"][0]["backendRefs"]] == [2, 1]

    refused = (
        "validate placement intent: annotation ome.io/cluster-selector is unsupported; "
        "declare spec.placement.mode and migrate restrictions to clusterAffinity"
    )

    async def retried() -> bool:
        lines = [line for line in process.log.splitlines() if refused in line]
        return len(lines) >= 2 and all("\tReconciler error\t" in line for line in lines)

    await eventually(retried, what="the refusal logged as a Reconciler error at each retry")

    # the intent is valid again: published again
    await scene.kubectl(
        "annotate", "inferenceservice", "chat", "-n", ns, "ome.io/cluster-selector-"
    )
    tmap = await scene.published("chat")
    assert tmap["status"]["published"] is True


async def test_a_lost_finalizer_is_restored_so_an_unrouted_map_is_reaped(scene: Scene) -> None:
    """OME restores `ome.io/trafficmap-publisher` whenever the status records publisher
    state, before its active gate and owner check; routing then reaps the map (it waits
    for that repair) and the publisher finalizes it: the route goes too."""
    ns = scene.namespace
    await scene.service("chat", {"worker-a": 2, "worker-b": 1})
    first = await scene.start(values())
    await scene.published("chat")
    await first.stop()
    await scene.kubectl(
        "patch", "trafficmap", "chat", "-n", ns, "--type=json",
        "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
    )  # fmt: skip
    await scene.kubectl(
        "patch", "inferenceservice", "chat", "-n", ns, "--type=merge",
        "-p", json.dumps({"spec": {"routing": {"enabled": False}}}),
    )  # fmt: skip

    await scene.start(values())

    async def gone() -> bool:
        return (
            await get_map(scene.plane, "chat", ns) is None
            and await scene.get("httproute", "chat-global") is None
        )

    await eventually(gone, what="the map reaped and its route removed")


async def test_a_map_without_a_source_uid_is_an_invalid_owner(scene: Scene) -> None:
    """OME's `validatePublisherSourceUID`: `source UID is not established`. The service's
    malformed drain annotation keeps the routing controller from writing the status."""
    ns = scene.namespace
    await scene.service("chat", {"worker-a": 1}, annotations={"ome.io/traffic-drain": "nope"})
    isvc = await scene.get("inferenceservice", "chat")
    assert isvc is not None
    meta = isvc["metadata"]
    tmap = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {
            "name": "chat",
            "namespace": ns,
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": "chat",
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"service": "chat", "mode": "All", "observedISVCGeneration": meta["generation"]},
    }
    await scene.kubectl("apply", "-f", "-", input=yaml.safe_dump(tmap))
    process = await scene.start(values())
    written = await scene.published("chat", "InvalidOwner")
    assert condition(written, "Published")["message"] == (
        "TrafficMap owner identity is invalid or stale"
    )
    assert "sourceUID" not in (written.get("status") or {})
    assert (
        "TrafficMap source provenance changed during reconciliation: "
        f"TrafficMap {ns}/chat source UID is not established"
    ) in process.log
    assert await scene.get("httproute", "chat-global") is None
