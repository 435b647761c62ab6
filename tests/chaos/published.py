"""A recorder of every change to the objects the publisher writes, from watches.

`PublishedRecorder` lists and then watches the HTTPRoutes, Services and EndpointSlices of
every namespace that carry the publication label (`ome.io/managed-by:
placement-endpoint`), and keeps each change as it arrives: its kind, name,
resourceVersion and when it was seen. Like `invariants.MapRecorder` it outlives the API
server (a broken watch resumes from the last resourceVersion it saw, a `410 Gone` lists
again), so no change is missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from lightkube import ApiError, AsyncClient

from ome_routing.core.publication import MANAGED_BY, MANAGED_BY_VALUE
from ome_routing.kube.published import EndpointSlice, HTTPRoute, Service

KINDS: dict[str, Any] = {"HTTPRoute": HTTPRoute, "Service": Service, "EndpointSlice": EndpointSlice}


@dataclass(frozen=True)
class Change:
    at: float  # monotonic, when the watch brought it
    kind: str
    type: str  # ADDED, MODIFIED or DELETED
    namespace: str
    name: str
    resource_version: str


@dataclass
class PublishedRecorder:
    client: AsyncClient
    changes: list[Change] = field(default_factory=list)
    #: kind -> namespace/name -> the object as last seen
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    relists: int = 0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def __aenter__(self) -> PublishedRecorder:
        listed = []
        for kind, resource in KINDS.items():
            ready = asyncio.Event()
            listed.append(ready)
            self._tasks.append(asyncio.create_task(self._run(kind, resource, ready)))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in listed)), 60)
        return self

    async def __aexit__(self, *_: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def names(self, kind: str) -> set[str]:
        return set(self.objects.get(kind, {}))

    async def _run(self, kind: str, resource: Any, ready: asyncio.Event) -> None:
        labels = {MANAGED_BY: MANAGED_BY_VALUE}
        version: str | None = None
        seen = self.objects.setdefault(kind, {})
        while True:
            try:
                if version is None:
                    listing = self.client.list(resource, namespace="*", labels=labels)
                    async for obj in listing:
                        raw = obj.to_dict()
                        key = _key(raw)
                        old = seen.get(key)
                        seen[key] = raw
                        if ready.is_set() and (
                            old is None
                            or old["metadata"]["resourceVersion"]
                            != raw["metadata"]["resourceVersion"]
                        ):
                            self._record(kind, "MODIFIED", raw)
                    version = listing.resourceVersion
                    ready.set()
                stream = self.client.watch(
                    resource, namespace="*", labels=labels, resource_version=version
                )
                async for event, obj in stream:
                    raw = obj.to_dict()
                    version = raw["metadata"]["resourceVersion"]
                    if event == "DELETED":
                        seen.pop(_key(raw), None)
                    else:
                        seen[_key(raw)] = raw
                    self._record(kind, event, raw)
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.status.code == 410:
                    version = None
                    self.relists += 1
                else:
                    await asyncio.sleep(0.2)
            except Exception:  # the API server is away: resume from the last version
                await asyncio.sleep(0.2)

    def _record(self, kind: str, event: str, raw: dict[str, Any]) -> None:
        meta = raw["metadata"]
        self.changes.append(
            Change(
                time.monotonic(),
                kind,
                event,
                meta.get("namespace", ""),
                meta["name"],
                meta["resourceVersion"],
            )
        )


def _key(raw: dict[str, Any]) -> str:
    meta = raw["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"
