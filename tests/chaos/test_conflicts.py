"""Another writer on the same TrafficMap statuses, with stale resourceVersions.

While reporters flap (so the controller rewrites every map every poll), a second writer
reads a map, waits a little, and writes its own condition into the status with the
resourceVersion it read: often stale, so often refused with 409. What it did write must
survive the controller's writes, and the controller must still converge.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

import pytest
from fleet import NAMESPACE, Fleet
from lightkube import ApiError

from ome_routing.kube.resources import TrafficMap

pytestmark = pytest.mark.timeout(300)

SERVICES = 20
RUN = 20.0
THEIRS = "Audited"  # a condition type the routing controller does not own


async def other_writer(
    fleet: Fleet, written: dict[str, str], counts: dict[str, int], stop: asyncio.Event
) -> None:
    """Write until told to stop, between writes only: a write cut off by cancellation could
    land on the server without being recorded here."""
    rng = random.Random(13)
    serial = 0
    while not stop.is_set():
        name = rng.choice(fleet.services)
        tmap = await fleet.client.get(TrafficMap, name, namespace=NAMESPACE)
        raw = tmap.to_dict()
        await asyncio.sleep(rng.uniform(0, 0.3))  # meanwhile the controller may write
        serial += 1
        message = f"audit {serial}"
        status = raw.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != THEIRS]
        conditions.append(
            {
                "type": THEIRS,
                "status": "True",
                "reason": "Audited",
                "message": message,
                "lastTransitionTime": "2026-11-30T00:00:00Z",
            }
        )
        status["conditions"] = conditions
        try:
            await fleet.client.replace(TrafficMap.Status.from_dict(raw))  # type: ignore[attr-defined]
        except ApiError as err:
            if err.status.code != 409:
                raise
            counts["refused"] += 1
            continue
        counts["written"] += 1
        written[name] = message


async def test_a_second_status_writer_keeps_its_condition_and_the_maps_converge(
    fleet: Fleet, figure: Callable[[str, object], None]
) -> None:
    await fleet.route(SERVICES)
    await fleet.start_controller("leader")
    await fleet.until_correct()
    fleet.recorder.rises_allowed = True
    reporter = fleet.reporters["worker-a"]
    written: dict[str, str] = {}
    counts = {"written": 0, "refused": 0}
    stop = asyncio.Event()
    writer = asyncio.create_task(other_writer(fleet, written, counts, stop))
    deadline = time.monotonic() + RUN
    try:
        while time.monotonic() < deadline:
            reporter.servable = 3 - reporter.servable
            await asyncio.sleep(0.4)
            assert not writer.done(), writer.exception()
    finally:
        stop.set()
        await asyncio.wait_for(writer, 30)
    reporter.servable = 1
    back = time.monotonic()
    await fleet.until_correct()
    figure(
        "second writer: writes accepted / refused as stale",
        f"{counts['written']} / {counts['refused']}",
    )
    assert await fleet.quiet_writes(3) == 0
    figure("quiet after the second writer stopped (s)", time.monotonic() - back)
    lost = []
    for name, message in written.items():
        raw = (await fleet.client.get(TrafficMap, name, namespace=NAMESPACE)).to_dict()
        theirs = [c for c in raw["status"]["conditions"] if c["type"] == THEIRS]
        if [c["message"] for c in theirs] != [message]:
            lost.append(f"{name}: wrote {message!r}, found {theirs}")
    figure("conditions of the second writer lost", len(lost))
    assert lost == [], "the controller overwrote a condition it does not own"
    assert fleet.recorder.violations == []
