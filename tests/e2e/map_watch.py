"""Looking at TrafficMaps as the controller writes them, without racing its writes.

- `settled`: whether a map's status describes its spec (the controller writes a changed
  spec and then the status, in two requests).
- `MapHistory`, `first_version`: every version of one map from a watch, for what a read
  every so often could miss.
- `list_version`, `resource_version`: where such a watch starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from controller_harness import PATIENCE, eventually, kubectl
from lightkube import AsyncClient

from ome_routing.kube.resources import TrafficMap
from ome_routing_dev.devcluster import LocalControlPlane

#: the conditions the routing controller writes with every reconcile of a routed map
ROUTING_CONDITIONS = ("Routable", "OverrideActive", "CapacityFallback")


def settled(tmap: dict[str, Any] | None) -> bool:
    """Whether the controller's conditions describe the map's spec as it is now.

    The controller writes a changed spec and then the status, in two requests: a read can
    fall between them and show the new spec with the old conditions. Every routing
    condition carries the generation it was written for, so once all of them carry the
    map's generation, the status of that spec has landed too.
    """
    if tmap is None:
        return False
    generation = tmap["metadata"].get("generation")
    written = {c["type"]: c for c in (tmap.get("status") or {}).get("conditions") or []}
    return all(
        written.get(type_, {}).get("observedGeneration") == generation
        for type_ in ROUTING_CONDITIONS
    )


class MapHistory:
    """Every version of one TrafficMap written after resourceVersion `since`, from a watch,
    while the recorder runs: reading the map every so often can miss a version that only
    shows for a moment when reads are slow."""

    def __init__(self, client: AsyncClient, namespace: str, name: str, since: str) -> None:
        self.versions: list[dict[str, Any]] = []
        self._task = asyncio.create_task(self._record(client, namespace, name, since))

    async def _record(self, client: AsyncClient, namespace: str, name: str, since: str) -> None:
        versions = client.watch(
            TrafficMap, namespace=namespace, fields={"metadata.name": name}, resource_version=since
        )
        async for _, obj in versions:
            self.versions.append(obj.to_dict())

    async def until(
        self, matches: Callable[[dict[str, Any]], bool], what: str, timeout: float = PATIENCE
    ) -> dict[str, Any]:
        """The first recorded version that `matches`, once the watch has brought one."""

        async def found() -> dict[str, Any] | None:
            if self._task.done():
                self._task.result()  # a failed watch fails the test with its error
                raise AssertionError("the watch ended")
            return next((v for v in self.versions if matches(v)), None)

        return await eventually(found, timeout, what)

    async def stop_after(self, last: dict[str, Any], timeout: float = PATIENCE) -> None:
        """Stop once the version `last` (which a read found) has come through the watch,
        so that nothing written before it is left out."""
        wanted = last["metadata"]["resourceVersion"]
        try:
            await self.until(
                lambda v: bool(v["metadata"]["resourceVersion"] == wanted),
                f"version {wanted} to come through the watch",
                timeout,
            )
        finally:
            await self.cancel()

    async def cancel(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def list_version(plane: LocalControlPlane, namespace: str) -> str:
    """The resourceVersion of the namespace's TrafficMaps now, present or not: where a watch
    starts so that it misses nothing written from here on."""
    listed = await kubectl(plane, "get", "trafficmaps", "-n", namespace, "-o", "json")
    return str(json.loads(listed.stdout)["metadata"]["resourceVersion"])


async def first_version(
    client: AsyncClient,
    namespace: str,
    name: str,
    matches: Callable[[dict[str, Any]], bool],
    *,
    since: str,
    timeout: float = PATIENCE,
) -> dict[str, Any]:
    """The first version of TrafficMap `name` written after resourceVersion `since` that
    `matches`, from a watch: reading the map every so often can miss a version that later
    writes change (a probe's failure count goes on after its gate closes)."""
    history = MapHistory(client, namespace, name, since)
    try:
        return await history.until(matches, f"a matching version of {namespace}/{name}", timeout)
    finally:
        await history.cancel()


async def resource_version(client: AsyncClient, namespace: str, name: str) -> str:
    """The TrafficMap's resourceVersion now: where a `first_version` watch starts."""
    tmap = await client.get(TrafficMap, name, namespace=namespace)
    assert tmap.metadata is not None and tmap.metadata.resourceVersion is not None
    return tmap.metadata.resourceVersion
