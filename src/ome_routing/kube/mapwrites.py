"""The routing controller's writes of a TrafficMap, each on the version it was read at.

- `create`: a new map, controlled by its service (409 when the cache had not seen one).
- `patch_spec`: a merge patch of the spec carrying the map's resourceVersion.
- `status`: OME's server-side apply of `sourceUID` and the routing conditions, field owner
  `ome-trafficmap-routing`, carrying the map's resourceVersion; only when they changed,
  and on a conflict merged into the map read again (as OME's `RetryOnConflict`).
- `delete`: with OME's preconditions on the map's UID and resourceVersion.
- `refresh`: the map read again from the API server into the shared cache (or out of it,
  when it is gone), after a write met a newer map or none.
- `fence_plan`: OME's fence before a spec with a plan ID is written: the InferenceService
  as the API server holds it now must be the one the spec was computed from.

Every other write that meets a newer map (409) or none (404) raises `Conflict`, for the
controller to read the map again and reconcile from it: a spec computed from an old view
is never sent again on a newer one. Each
write that lands goes into the shared cache at once (`Informer.remember`).

Errors: `Conflict`, `StaleSnapshot` (`placement source or plan changed`), and lightkube's
`ApiError` for anything else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from ome_routing.kube import reconcile
from ome_routing.kube.ownership import STALE_SNAPSHOT, same_snapshot
from ome_routing.kube.resources import (
    FIELD_MANAGER,
    ROUTING_STATUS_FIELD_OWNER,
    InferenceService,
    TrafficMap,
    fenced_delete,
)
from ome_routing.kube.watching import Informer, RawObject
from ome_routing.metrics import RoutingMetrics

ServiceKey = tuple[str, str]
#: client-go's `retry.DefaultRetry`: five tries of a write that met a conflict
STATUS_TRIES = 5


class Conflict(Exception):
    """A write met a newer map than the one it was computed from (409), or none (404)."""


class StaleSnapshot(Exception):
    """The InferenceService changed between the cache's view and the API server's."""


def raw(obj: Any) -> RawObject:
    return dict(obj.to_dict()) if hasattr(obj, "to_dict") else dict(obj)


class MapWrites:
    def __init__(
        self,
        client: AsyncClient,
        maps: Informer,
        metrics: RoutingMetrics,
        clock: Callable[[], datetime],
    ) -> None:
        self._kube = client
        self._maps = maps
        self._metrics = metrics
        self._clock = clock

    async def read_live(self, resource: Any, key: ServiceKey) -> RawObject | None:
        """The object as the API server holds it now (not the cache); None when gone."""
        try:
            return raw(await self._kube.get(resource, key[1], namespace=key[0]))
        except ApiError as err:
            if err.status.code == 404:
                return None
            raise

    async def refresh(self, key: ServiceKey) -> RawObject | None:
        """The map as the API server holds it now, put into the shared cache; None when gone.

        A map that is gone leaves the cache (the version the cache holds), ahead of the
        watch's event, so that nothing reconciles again at once from the cache's copy.
        """
        live = await self.read_live(TrafficMap, key)
        if live is not None:
            self._maps.remember(live)
        elif (cached := self._maps.cache.get(key)) is not None:
            self._maps.forget(key, str((cached.get("metadata") or {}).get("resourceVersion")))
        return live

    async def fence_plan(self, key: ServiceKey, isvc: RawObject) -> None:
        live = await self.read_live(InferenceService, key)
        if live is None or not same_snapshot(isvc, live):
            raise StaleSnapshot(STALE_SNAPSHOT)

    async def create(
        self,
        key: ServiceKey,
        uid: str,
        spec: Mapping[str, Any],
        annotations: Mapping[str, Any] | None = None,
    ) -> RawObject:
        body = reconcile.new_map(key[0], key[1], uid, spec)
        marks = {k: v for k, v in (annotations or {}).items() if v is not None}
        if marks:  # ours (a ramp's); OME's maps carry none
            body["metadata"]["annotations"] = marks
        return await self._send(
            "create", self._kube.create(TrafficMap.from_dict(body), field_manager=FIELD_MANAGER)
        )

    async def patch_spec(self, key: ServiceKey, body: Mapping[str, Any]) -> RawObject:
        return await self._send(
            "spec",
            self._kube.patch(
                TrafficMap,
                key[1],
                dict(body),
                namespace=key[0],
                patch_type=PatchType.MERGE,
                field_manager=FIELD_MANAGER,
            ),
        )

    async def status(
        self, key: ServiceKey, tmap: RawObject, uid: str, conditions: list[Any]
    ) -> None:
        """Apply the routing status where it changed. A conflict reads the map again and
        applies the status merged into what it read, as OME's `RetryOnConflict` does (five
        tries), so that a spec just written is not left with the old conditions because
        the publisher wrote its own status in between."""
        for attempt in range(STATUS_TRIES):
            old = tmap.get("status") or {}
            status = reconcile.desired_status(tmap, uid, conditions, self._clock())
            if status == old:
                return
            # the publisher's condition and journal have their own field owner, and stay
            write = self._kube.patch(
                TrafficMap.Status,
                key[1],
                reconcile.status_apply(tmap, status),
                namespace=key[0],
                patch_type=PatchType.APPLY,
                field_manager=ROUTING_STATUS_FIELD_OWNER,
                force=True,
            )
            try:
                await self._send("status", write)
                return
            except Conflict:
                live = await self.refresh(key) if attempt + 1 < STATUS_TRIES else None
                if live is None:
                    raise
                tmap = live

    async def delete(self, key: ServiceKey, tmap: RawObject) -> None:
        meta = tmap.get("metadata") or {}
        uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        for value, field in ((uid, "UID"), (version, "resourceVersion")):
            if not value:  # OME refuses an unconditional delete too, in these words
                raise ValueError(f"reap TrafficMap {key[0]}/{key[1]}: {field} is empty")
        try:
            await fenced_delete(
                self._kube, TrafficMap, key[0], key[1], uid=uid, resource_version=version
            )
        except ApiError as err:
            if err.status.code == 409:
                raise Conflict() from err
            if err.status.code != 404:
                raise
        self._metrics.writes.labels(kind="delete").inc()
        if not meta.get("finalizers"):  # else it stays, terminating, for the publisher to finalize
            self._maps.forget(key, version)

    async def _send(self, kind: str, write: Awaitable[Any]) -> RawObject:
        try:
            written = await write
        except ApiError as err:
            if err.status.code in (404, 409):
                raise Conflict() from err
            raise
        self._metrics.writes.labels(kind=kind).inc()
        result = raw(written)
        self._maps.remember(result)
        return result
