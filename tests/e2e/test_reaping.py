"""Reaping as OME reaps, on a real API server with the real controller: with its service
gone, an orphaned map (no controller, a recorded source UID, `spec.service` naming it) is
deleted; a map that still has a controller is left to the garbage collector; a hand-made
map with no provenance is never touched."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from controller_harness import ROUTING_ON, ControllerProcess, eventually, get_map, kubectl

from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(180)


async def a_map(
    plane: LocalControlPlane, namespace: str, name: str, *, owner: bool, source: str
) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceService",
                "name": name,
                "uid": str(uuid.uuid4()),
                "controller": True,
            }
        ]
    body = {"apiVersion": "ome.io/v1beta1", "kind": "TrafficMap", "metadata": meta}
    body["spec"] = {"service": name}
    await kubectl(plane, "apply", "-f", "-", input=json.dumps(body))
    if source:
        await kubectl(
            plane, "patch", "trafficmap", name, "-n", namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"sourceUID": source}}),
        )  # fmt: skip


async def test_only_an_orphan_with_provenance_is_reaped_once_its_service_is_gone(
    control_plane: LocalControlPlane, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    await a_map(control_plane, namespace, "orphan", owner=False, source="gone-uid")
    await a_map(control_plane, namespace, "controlled", owner=True, source="gone-uid")
    await a_map(control_plane, namespace, "handmade", owner=False, source="")
    process = ControllerProcess(
        kubeconfig, ROUTING_ON, tmp_path, lease=f"lease-{uuid.uuid4().hex[:8]}"
    ).start()
    try:
        await process.wait_started()

        async def orphan_gone() -> bool:
            return await get_map(control_plane, "orphan", namespace) is None

        await eventually(orphan_gone, what="the orphan to be reaped")
        assert "deleted TrafficMap " + f"{namespace}/orphan" in process.log
        # the others are never deleted: the controller has seen them all (it reaped the
        # orphan listed with them), and leaves them be
        for name in ("controlled", "handmade"):
            assert await get_map(control_plane, name, namespace) is not None, name
            assert f"deleted TrafficMap {namespace}/{name}" not in process.log
    finally:
        await process.stop()
