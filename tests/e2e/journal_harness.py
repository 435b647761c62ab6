"""Test parts for the journal of weight changes (tests/e2e/test_journal.py, tests/soak).

A service `svc` routed on two reporters (worker-a reporting 3, worker-b 2, admitted 3:
weights 3:2) and a controller with or without `routing.journal.enabled`; the journal's
Events of a namespace as the API server holds them.
"""

from __future__ import annotations

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
    entry,
    eventually,
    get_map,
    isvc_manifest,
    kubectl,
    place,
)
from map_watch import settled

from ome_routing.core.journal import REPORTING_CONTROLLER
from ome_routing_dev.devcluster import LocalControlPlane

JOURNAL_ON: dict[str, Any] = {
    "ome": {
        "multicluster": {
            **ROUTING_ON["ome"]["multicluster"],
            "config": {"routing": {"enabled": True, "journal": {"enabled": True}}},
        }
    }
}


@pytest.fixture
async def reporters() -> AsyncIterator[dict[str, Reporter]]:
    started = {
        "worker-a": await Reporter(servable=3).start(),
        "worker-b": await Reporter(servable=2).start(),
    }
    try:
        yield started
    finally:
        for reporter in started.values():
            await reporter.stop()


@pytest.fixture
async def controllers() -> AsyncIterator[list[ControllerProcess]]:
    running: list[ControllerProcess] = []
    try:
        yield running
    finally:
        for process in running:
            await process.stop()


async def weights(plane: LocalControlPlane, namespace: str) -> dict[str, int] | None:
    tmap = await get_map(plane, "svc", namespace)
    if not settled(tmap) or not (tmap or {}).get("spec", {}).get("entries"):
        return None
    assert tmap is not None
    return {e["cluster"]: entry(tmap, e["cluster"])["weight"] for e in tmap["spec"]["entries"]}


async def journal_events(plane: LocalControlPlane, namespace: str) -> list[dict[str, Any]]:
    listed = await kubectl(plane, "get", "events.events.k8s.io", "-n", namespace, "-o", "json")
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return [e for e in items if e.get("reportingController") == REPORTING_CONTROLLER]


async def split(
    plane: LocalControlPlane, namespace: str, expected: dict[str, int]
) -> dict[str, int] | None:
    found = await weights(plane, namespace)
    return found if found == expected else None


async def route_on_two_homes(
    plane: LocalControlPlane,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
    workdir: Path,
    config: dict[str, Any],
    *,
    kubeconfig: Path | None = None,
    lease: str | None = None,
    controller_namespace: str = "default",
) -> ControllerProcess:
    """Route `svc` (the fast poll) on both reporters, admitted 3, and start a controller
    with `config` (as `kubeconfig`'s user, the admin's by default); returns once the
    weights are 3:2 (worker-b reporting 2)."""
    manifest = isvc_manifest("svc", namespace, FAST_POLL)
    await kubectl(plane, "apply", "-f", "-", input=manifest)
    homes = {c: r.url for c, r in reporters.items()}
    await place(plane, "svc", namespace, homes, admitted=3, ready=3)
    process = ControllerProcess(
        kubeconfig or plane.kubeconfig,
        config,
        workdir,
        lease=lease or f"lease-{uuid.uuid4().hex[:8]}",
        namespace=controller_namespace,
    )
    controllers.append(process.start())
    await process.wait_started()
    await eventually(
        lambda: split(plane, namespace, {"worker-a": 3, "worker-b": 2}), what="weights 3:2"
    )
    return process


async def drop_worker_b(
    plane: LocalControlPlane,
    namespace: str,
    reporters: dict[str, Reporter],
    controllers: list[ControllerProcess],
    workdir: Path,
    config: dict[str, Any],
) -> ControllerProcess:
    """Route `svc` on both reporters (admitted 3: weights 3:2), then drop worker-b to 1."""
    process = await route_on_two_homes(plane, namespace, reporters, controllers, workdir, config)
    reporters["worker-b"].servable = 1
    await eventually(
        lambda: split(plane, namespace, {"worker-a": 3, "worker-b": 1}), what="weights 3:1"
    )
    return process
