"""Informers: list, then watch, one kind of object, and keep a cache of it.

An informer lists all objects, reports every difference from its cache as an event
(deletions included), then watches from the list's resourceVersion. Any watch error
(a dropped connection, `410 Gone`) ends the watch and the informer lists again, so a
deletion that happened while it was not watching is never missed. The cache holds
raw JSON objects (plain dicts) keyed by (namespace, name); cluster-scoped objects use
an empty namespace.

It never raises from `run` except on cancellation; failures are logged and retried
with a capped backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from lightkube import AsyncClient
from lightkube.core.generic_client import ALL_NS

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]
RawObject = dict[str, Any]
#: (key, old, new): old is None for an addition, new is None for a deletion.
OnEvent = Callable[[ObjectKey, RawObject | None, RawObject | None], None]

_BACKOFF_START = 0.5
_BACKOFF_MAX = 30.0


def object_key(obj: RawObject) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _raw(obj: Any) -> RawObject:
    if hasattr(obj, "to_dict"):
        return dict(obj.to_dict())
    return dict(obj)


class Informer:
    """Keeps `cache` in step with the API server for one resource kind."""

    def __init__(
        self, client: AsyncClient, resource: Any, on_event: OnEvent, *, namespaced: bool
    ) -> None:
        self._client = client
        self._resource = resource
        self._on_event = on_event
        self._namespaced = namespaced
        self.cache: dict[ObjectKey, RawObject] = {}
        self.synced = asyncio.Event()
        self.kind: str = resource._api_info.resource.kind

    async def run(self) -> None:
        backoff = _BACKOFF_START
        while True:
            try:
                version = await self._relist()
                self.synced.set()
                backoff = _BACKOFF_START
                await self._watch(version)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any failure means: list again
                log.warning(
                    "watch of %s ended: %s; listing again in %.1fs", self.kind, _short(err), backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX)

    async def _relist(self) -> str:
        listing = (
            self._client.list(self._resource, namespace=ALL_NS)
            if self._namespaced
            else self._client.list(self._resource)
        )
        fresh: dict[ObjectKey, RawObject] = {}
        async for obj in listing:
            raw = _raw(obj)
            fresh[object_key(raw)] = raw
        version = listing.resourceVersion
        old = self.cache
        self.cache = fresh
        for key in old.keys() - fresh.keys():
            self._on_event(key, old[key], None)
        for key, raw in fresh.items():
            previous = old.get(key)
            if previous is None or _version(previous) != _version(raw):
                self._on_event(key, previous, raw)
        return version

    async def _watch(self, version: str) -> None:
        stream = (
            self._client.watch(self._resource, namespace=ALL_NS, resource_version=version)
            if self._namespaced
            else self._client.watch(self._resource, resource_version=version)
        )
        async for event_type, obj in stream:
            raw = _raw(obj)
            key = object_key(raw)
            previous = self.cache.get(key)
            if event_type == "DELETED":
                self.cache.pop(key, None)
                self._on_event(key, previous, None)
            elif event_type in ("ADDED", "MODIFIED"):
                self.cache[key] = raw
                self._on_event(key, previous, raw)

    def remember(self, raw: RawObject) -> None:
        """Put an object that this process just wrote into the cache, ahead of its watch event."""
        key = object_key(raw)
        current = self.cache.get(key)
        if current is None or _newer(raw, current):
            self.cache[key] = raw

    def forget(self, key: ObjectKey) -> None:
        self.cache.pop(key, None)


def _version(obj: RawObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _newer(a: RawObject, b: RawObject) -> bool:
    """Whether `a` is a later version of the object than `b` (resourceVersions are opaque,
    but etcd's are increasing integers; when they are not, trust the fresher write)."""
    va, vb = _version(a), _version(b)
    if va.isdigit() and vb.isdigit():
        return int(va) >= int(vb)
    return True


def _short(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."
