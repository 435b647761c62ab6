"""Watches that end with `410 Gone`: the informers list again and lose no change.

The API server here runs without its watch cache, and the controller asks it to end every
watch after a few seconds (`--min-watch-timeout=2s`: 2 to 4 s, where client-go's 5 to 10
minutes would outlast the test), so each watch is resumed from its last resourceVersion
straight against etcd; etcd's history is compacted after every change,
so a resumed watch finds its resourceVersion gone and ends with `410 Gone`. Changes to
placement status keep coming meanwhile; every one must reach its map.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

import pytest
from controller_harness import eventually
from fleet import ADMITTED, NAMESPACE, Fleet
from invariants import entries
from lightkube.types import PatchType

from ome_routing.kube.resources import InferenceService
from ome_routing_dev.devcluster import faults

pytestmark = pytest.mark.timeout(300)

SERVICES = 10
RUN = 25.0


@pytest.fixture
def apiserver_flags() -> tuple[str, ...]:
    return ("--watch-cache=false", "--min-request-timeout=2")


async def set_ready(fleet: Fleet, name: str, ready: int) -> None:
    homes = {cluster: r.url for cluster, r in fleet.reporters.items()}
    candidates = [
        {
            "cluster": cluster,
            "phase": "Admitted",
            "endpoint": url,
            "admittedReplicas": ADMITTED,
            "readyReplicas": ready if cluster == "worker-a" else ADMITTED,
        }
        for cluster, url in homes.items()
    ]
    await fleet.client.patch(
        InferenceService.Status,
        name,
        {"status": {"placement": {"phase": "Placed", "candidates": candidates}}},
        namespace=NAMESPACE,
        patch_type=PatchType.MERGE,
    )


async def test_watches_ended_by_compaction_relist_and_lose_no_change(
    fleet: Fleet, figure: Callable[[str, object], None]
) -> None:
    await fleet.route(SERVICES)
    leader = await fleet.start_controller("leader", args=("--min-watch-timeout=2s",))
    await fleet.until_correct()
    rng = random.Random(410)
    want = dict.fromkeys(fleet.services, ADMITTED)
    changes = compactions = 0
    deadline = time.monotonic() + RUN
    while time.monotonic() < deadline:
        name = rng.choice(fleet.services)
        want[name] = 1 if want[name] == ADMITTED else ADMITTED
        await set_ready(fleet, name, want[name])
        changes += 1
        await asyncio.sleep(rng.uniform(0.1, 0.6))
        await asyncio.to_thread(faults.compact, fleet.plane)
        compactions += 1

    def stale() -> list[str]:
        return [
            name
            for name, ready in want.items()
            if (entries(fleet.recorder.maps.get(name) or {}).get("worker-a") or {})
            .get("capacity", {})
            .get("ready")
            != ready
        ]

    async def caught_up() -> bool:
        return not stale()

    started = time.monotonic()
    await eventually(caught_up, 60, "every placement change to reach its map")
    figure("changes / compactions", f"{changes} / {compactions}")
    figure("last change to every map caught up (s)", time.monotonic() - started)
    gone = leader.log.count("resourceVersion for the provided watch is too old")
    figure("controller watches ended with 410 Gone", gone)
    figure("events lost", len(stale()))
    assert gone > 0, "the scenario must end watches with 410 Gone"
    assert await fleet.quiet_writes(3) == 0
    assert fleet.recorder.violations == []
