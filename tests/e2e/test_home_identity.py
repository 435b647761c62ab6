"""Which window a home has, and when its first poll goes out, on a real API server.

- A service deleted and created again under the same name is a new owner (a new UID):
  its homes start over with no readings, as OME's windows are keyed by the owner's UID.
- A home that appears while the controller runs is polled at once, not somewhere in
  its first period: with a 60s period, its ceiling shows within seconds.
"""

from __future__ import annotations

from typing import Any

import pytest
from controller_harness import FAST_POLL, entry, eventually, kubectl
from lightkube import AsyncClient
from map_watch import MapHistory, list_version
from test_controller import Scene, controllers, reporters, scene  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(240)

#: A poll whose second reading comes 5s after the first, so "awaiting quorum" shows.
SLOW_QUORUM: dict[str, Any] = {**FAST_POLL, "period": "5s", "timeout": "1s", "maxAge": "15s"}


def owner_uid(tmap: dict[str, Any] | None) -> str | None:
    if tmap is None:
        return None
    refs = tmap["metadata"].get("ownerReferences") or []
    return next((str(ref["uid"]) for ref in refs if ref.get("controller")), None)


async def isvc_uid(world: Scene, name: str = "svc") -> str:
    result = await kubectl(
        world.plane,
        "get",
        "inferenceservice",
        name,
        "-n",
        world.namespace,
        "-o",
        "jsonpath={.metadata.uid}",
    )
    return result.stdout


async def test_a_service_recreated_under_the_same_name_starts_its_homes_over(
    scene: Scene,  # noqa: F811 - the fixture
    kube_client: AsyncClient,
) -> None:
    await scene.route(**SLOW_QUORUM)
    await scene.start()
    old = await scene.until_ceilings()
    old_uid = owner_uid(old)
    assert old_uid == await isvc_uid(scene)

    await kubectl(scene.plane, "delete", "inferenceservice", "svc", "-n", scene.namespace)
    # A map its deleted service controls is the garbage collector's to delete, as in OME
    # (routing reaps only orphans); the local control plane runs no garbage collector, so
    # the test does its part.
    await kubectl(scene.plane, "delete", "trafficmap", "svc", "-n", scene.namespace)

    async def map_gone() -> bool:
        return await scene.map() is None

    await eventually(map_gone, what="the old service's TrafficMap to go")

    history = MapHistory(
        kube_client, scene.namespace, "svc", await list_version(scene.plane, scene.namespace)
    )
    try:
        await scene.route(**SLOW_QUORUM)
        new_uid = await isvc_uid(scene)
        assert new_uid != old_uid
        new = await scene.until_ceilings()
        await history.stop_after(new)
    finally:
        await history.cancel()
    seen: list[tuple[str | None, str | None]] = []
    for tmap in history.versions:
        if tmap["spec"].get("entries"):
            capacity = entry(tmap, "worker-a")["capacity"]
            state = (capacity.get("fallbackReason"), capacity.get("reported"))
            if not seen or seen[-1] != state:
                seen.append(state)
    assert owner_uid(new) == new_uid
    # the new owner's home had no ceiling until quorum polls of its own succeeded
    assert seen[0] in {
        ("no capacity report yet", None),
        ("capacity report awaiting quorum (1/2 accepted samples)", None),
    }
    assert ("capacity report awaiting quorum (1/2 accepted samples)", None) in seen


async def test_a_home_that_appears_while_the_controller_runs_is_polled_at_once(
    scene: Scene,  # noqa: F811 - the fixture
) -> None:
    """With a 60s period, a spread first poll would most likely come tens of seconds later."""
    await scene.start()
    once: dict[str, Any] = {
        **FAST_POLL,
        "samples": 1,
        "quorum": 1,
        "period": "60s",
        "timeout": "3s",
        "maxAge": "60s",
    }
    await scene.route(**once)

    async def both_ceilings() -> dict[str, Any] | None:
        tmap = await scene.map()
        if tmap is None or len(tmap["spec"].get("entries") or []) != 2:
            return None
        ok = all("reported" in e["capacity"] for e in tmap["spec"]["entries"])
        return tmap if ok else None

    # a wide margin over a reconcile and one poll; the next polls are a minute away
    tmap = await eventually(both_ceilings, timeout=10, what="both ceilings from the first polls")
    assert {e["cluster"]: e["capacity"]["reported"] for e in tmap["spec"]["entries"]} == {
        "worker-a": 3,
        "worker-b": 1,
    }
    assert {c: r.requests for c, r in scene.reporters.items()} == {"worker-a": 1, "worker-b": 1}
