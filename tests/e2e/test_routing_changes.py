"""The three routing changes of docs/routing-changes.md together, on one service.

`svc` is routed on two reporters (admitted 3: weights 3:2) by a controller with the
journal on; its InferenceService carries a shadow policy (quorum 1 where live has 2) and
a ramp (a quarter of a home's capacity a period). worker-b's reporter drops to 1 and
then comes back to 2: the shadow follows at the first low reading, live at quorum, and
the journal records the fall, which is never ramped; on the way back up the ramp takes
worker-b from 1 to 2 replicas half a replica a step (3:1, 2:1, 3:2), each step
journalled. `kubectl ome traffic diff` and `history` read that one service.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from controller_harness import ControllerProcess, Reporter, eventually, get_map, kubectl
from journal_harness import (
    JOURNAL_ON,
    controllers,
    journal_events,
    reporters,
    route_on_two_homes,
    split,
)
from kubectl_ome_harness import kubectl_ome, plugin_env

from ome_routing.core.ramps import MAX_INCREASE_ANNOTATION, RAMP_ANNOTATION
from ome_routing.core.shadow import ANNOTATION as SHADOW_ANNOTATION
from ome_routing_dev.devcluster import LocalControlPlane

__all__ = ["controllers", "plugin_env", "reporters"]  # fixtures

pytestmark = pytest.mark.timeout(150)

#: the shadow: the live poll (controller_harness.FAST_POLL) with quorum 1
SHADOW = {
    "capacity": {
        "path": "/capacity",
        "method": "GET",
        "format": "Report",
        "samples": 3,
        "quorum": 1,
        "period": "1s",
        "timeout": "500ms",
        "maxAge": "10s",
    }
}


async def test_shadow_ramp_and_journal_on_one_service(
    control_plane: LocalControlPlane,
    tmp_path: Path,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
    plugin_env: dict[str, str],
) -> None:
    await route_on_two_homes(control_plane, namespace, reporters, controllers, tmp_path, JOURNAL_ON)
    await kubectl(
        control_plane,
        "annotate",
        "inferenceservice",
        "svc",
        "-n",
        namespace,
        f"{SHADOW_ANNOTATION}={json.dumps(SHADOW)}",
        f"{MAX_INCREASE_ANNOTATION}=0.25",
    )

    async def shadow_table() -> dict[str, Any] | None:
        listed = await kubectl(
            control_plane, "get", "shadowtrafficmaps", "-n", namespace, "-o", "json"
        )
        items = json.loads(listed.stdout)["items"]
        return items[0] if items and (items[0].get("status") or {}).get("homes") else None

    await eventually(shadow_table, what="svc's ShadowTrafficMap")

    # worker-b drops to 1: the shadow (quorum 1) and then live (quorum 2) follow; a fall is
    # never ramped
    reporters["worker-b"].servable = 1
    await eventually(
        lambda: split(control_plane, namespace, {"worker-a": 3, "worker-b": 1}),
        what="weights 3:1",
    )

    # worker-b comes back to 2: the ramp takes it up half a replica a step (a quarter of
    # its capacity 2), from its ramped 1: 3:1 -> 2:1 (1.5 beside 3) -> 3:2
    reporters["worker-b"].servable = 2

    async def ramped_to_target() -> dict[str, Any] | None:
        tmap = await get_map(control_plane, "svc", namespace)
        assert tmap is not None
        entries = {e["cluster"]: e["weight"] for e in tmap["spec"]["entries"]}
        return tmap if (entries["worker-a"], entries["worker-b"]) == (3, 2) else None

    tmap = await eventually(ramped_to_target, what="weights back to 3:2")
    ramp = json.loads(tmap["metadata"]["annotations"][RAMP_ANNOTATION])
    assert ramp["maxIncreasePerPeriod"] == "0.25"
    assert ramp["homes"]["worker-b"]["periodsLeft"] == 0

    # the journal has the fall and each step of the rise, in order
    async def journalled() -> list[str] | None:
        notes = [
            e["note"]
            for e in sorted(
                await journal_events(control_plane, namespace),
                key=lambda e: (e.get("eventTime") or "", e["metadata"]["name"]),
            )
            if e["metadata"].get("annotations", {}).get("routing.ome-routing.io/home") == "worker-b"
        ]
        wanted = ("weight 2 -> 1", "weight 1 -> 2")
        return notes if all(any(w in n for n in notes) for w in wanted) else None

    notes = await eventually(journalled, what="worker-b's fall and rise in the journal")
    assert any("weight 2 -> 1" in n for n in notes), notes

    diff = await asyncio.to_thread(
        kubectl_ome, control_plane, plugin_env, "traffic", "diff", "svc", "-n", namespace
    )
    assert diff.returncode == 0, diff.stderr
    assert "worker-a" in diff.stdout and "worker-b" in diff.stdout, diff.stdout

    history = await asyncio.to_thread(
        kubectl_ome, control_plane, plugin_env, "traffic", "history", "svc", "-n", namespace
    )
    assert history.returncode == 0, history.stderr
    rows = [line.split() for line in history.stdout.splitlines()[1:]]
    # TIME, LAST SEEN, COUNT, TYPE, REASON, HOME, then WEIGHT ("2 -> 1") and CAUSE
    of_b = [" ".join(row[4:10]) for row in rows if row[5:6] == ["worker-b"]]
    # oldest first: the fall (the ceiling at quorum), then the ramp's last step back to 2
    fall = of_b.index("CeilingChanged worker-b 2 -> 1 ceiling")
    assert any(row.startswith("CeilingChanged worker-b 1 ceiling") for row in of_b[fall + 1 :]), (
        history.stdout
    )  # the ceiling is back, the ramp holds the weight: RampStep's words
    assert "RampDone worker-b 1 -> 2 ramp" in of_b[fall + 1 :], history.stdout
    assert "ramping to its target weight" in history.stdout, history.stdout
    # never a jump from 3:1 straight to 3:2: the halfway step (2:1) was published between,
    # worker-a's weight going 3 -> 2 -> 3 around it
    of_a = [" ".join(row[5:9]) for row in rows if row[5:6] == ["worker-a"]]
    halfway = of_a.index("worker-a 3 -> 2")
    assert "worker-a 2 -> 3" in of_a[halfway + 1 :], history.stdout
