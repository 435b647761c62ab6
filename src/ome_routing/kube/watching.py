"""Informers: list, then watch, one kind of object, and keep a cache of it.

An informer lists all objects, reports every difference from its cache as an event
(deletions included), then watches from the list's resourceVersion. Any watch error
(a dropped connection, `410 Gone`) ends the watch and the informer lists again, so a
deletion that happened while it was not watching is never missed. The cache holds
raw JSON objects (plain dicts) keyed by (namespace, name); cluster-scoped objects use
an empty namespace.

The cache holds only what reconciles read, as controller-runtime's cache transforms
do: every object loses `metadata.managedFields` and kubectl's last-applied copy of
itself (`lean`), which are most of a small object's size; InferenceServices keep only
what reconciles read (`routing_view`: the metadata, the spec's routing and placement,
the placement status); and the keys and short strings of all cached objects are shared
(`compact`), which halves a TrafficMap's size in memory. An informer may be given a
`transform` of its own instead.

An informer may keep its cache packed (`packing.PackedStore`: each object one bytes
object, decoded on every read); its objects then skip `compact`, which packing makes moot.

A list is read a page at a time (`limit`/`continue`, `LIST_PAGE` objects a page), as
client-go's reflector does: the objects of a page are packed into the new cache before
the next page is read, so listing 30,000 services never holds them all decoded at once.

One informer may serve several reconcilers (`add_handler`): the routing controller and
the publisher share one watch and one cache of each kind they both read, rather than
holding every map and service twice.

It never raises from `run` except on cancellation; failures are logged and retried
with a capped backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, MutableMapping
from sys import intern
from typing import Any

from lightkube import AsyncClient
from lightkube.core.generic_client import ALL_NS

from ome_routing.kube.packing import PackedStore

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]
RawObject = dict[str, Any]
#: (key, old, new): old is None for an addition, new is None for a deletion.
OnEvent = Callable[[ObjectKey, RawObject | None, RawObject | None], None]

#: Objects per page of a list (client-go's reflector reads 500 a page too).
LIST_PAGE = 500
_BACKOFF_START = 0.5
_BACKOFF_MAX = 30.0


def object_key(obj: RawObject) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


#: kubectl's copy of the object as last applied: never read, often the object's size again
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
Transform = Callable[[RawObject], RawObject]


def lean(raw: RawObject) -> RawObject:
    """The object without `metadata.managedFields` and the last-applied annotation."""
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        return raw
    annotations = meta.get("annotations")
    drop_annotation = isinstance(annotations, dict) and LAST_APPLIED in annotations
    if "managedFields" not in meta and not drop_annotation:
        return raw
    meta = {k: v for k, v in meta.items() if k != "managedFields"}
    if drop_annotation:
        assert isinstance(annotations, dict)
        meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return {**raw, "metadata": meta}


#: Strings up to this long are shared between cached objects: names, clusters, reasons,
#: condition types, timestamps (many objects are written within one second).
_SHARED_TEXT = 64


def compact(value: Any) -> Any:
    """The same JSON value, with its keys and short strings shared with every other object's.

    Each decoded object holds its own copy of every key (`"lastTransitionTime"` once per
    condition of every map); shared, they are held once for the whole cache.
    """
    if isinstance(value, dict):
        return {intern(key): compact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [compact(item) for item in value]
    if isinstance(value, str) and len(value) <= _SHARED_TEXT:
        return intern(value)
    return value


#: What reconciles read of an InferenceService (`kube.reconcile`): its spec's routing
#: and placement, and its placement status.
ROUTING_SPEC = ("routing", "placement")
ROUTING_STATUS = ("placement",)


def routing_view(raw: RawObject) -> RawObject:
    """An InferenceService as reconciles read it: metadata, routing and placement only."""
    view = lean(raw)
    kept: RawObject = {k: v for k, v in view.items() if k not in ("spec", "status")}
    for part, names in (("spec", ROUTING_SPEC), ("status", ROUTING_STATUS)):
        whole = view.get(part)
        if isinstance(whole, dict):
            kept[part] = {name: whole[name] for name in names if name in whole}
        elif part in view:
            kept[part] = whole
    return kept


def cached(raw: RawObject) -> RawObject:
    """What the cache keeps of an object by default: `lean`, then `compact`."""
    kept: RawObject = compact(lean(raw))
    return kept


def cached_routing_view(raw: RawObject) -> RawObject:
    """What the cache keeps of an InferenceService: `routing_view`, then `compact`."""
    kept: RawObject = compact(routing_view(raw))
    return kept


#: The views of the kinds whose reconciles read little of them.
VIEWS: dict[str, Transform] = {"InferenceService": cached_routing_view}
#: The same, for a packed cache.
PACKED_VIEWS: dict[str, Transform] = {"InferenceService": routing_view}


def _raw(obj: Any) -> RawObject:
    if hasattr(obj, "to_dict"):
        return dict(obj.to_dict())
    return dict(obj)


class Informer:
    """Keeps `cache` in step with the API server for one resource kind."""

    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        on_event: OnEvent | None,
        *,
        namespaced: bool,
        transform: Transform | None = None,
        packed: bool = False,
        page: int = LIST_PAGE,
    ) -> None:
        self._client = client
        self.kind: str = resource._api_info.resource.kind
        #: what the cache keeps of each object (and the events carry): by default, the
        #: kind's view (`VIEWS`), or `cached`; when packed, the same without `compact`
        views, default = (PACKED_VIEWS, lean) if packed else (VIEWS, cached)
        self._transform = transform if transform is not None else views.get(self.kind, default)
        self._packed = packed
        self._resource = resource
        self._handlers: list[OnEvent] = [] if on_event is None else [on_event]
        self._on_event: OnEvent = self._tell
        self._namespaced = namespaced
        self._page = page
        self.cache: MutableMapping[ObjectKey, RawObject] = self._store()
        self.synced = asyncio.Event()

    def _store(self) -> MutableMapping[ObjectKey, RawObject]:
        return PackedStore() if self._packed else {}

    def add_handler(self, on_event: OnEvent) -> None:
        """Tell `on_event` of every event too; add it before `run`, or it misses the list."""
        self._handlers.append(on_event)

    def _tell(self, key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        for handler in self._handlers:
            handler(key, old, new)

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
            self._client.list(self._resource, namespace=ALL_NS, chunk_size=self._page)
            if self._namespaced
            else self._client.list(self._resource, chunk_size=self._page)
        )
        fresh = self._store()
        async for obj in listing:
            raw = self._transform(_raw(obj))
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
            raw = self._transform(_raw(obj))
            key = object_key(raw)
            previous = self.cache.get(key)
            if event_type == "DELETED":
                self.cache.pop(key, None)
                self._on_event(key, previous, None)
            elif event_type in ("ADDED", "MODIFIED"):
                self.cache[key] = raw
                self._on_event(key, previous, raw)

    def remember(self, raw: RawObject) -> None:
        """Put an object that this process just wrote into the cache, ahead of its watch event.

        A write that took the last finalizer off an object being deleted leaves nothing on
        the API server: it is dropped, never put back. Its DELETED event may already have
        been seen, and a cache shared by several reconcilers would otherwise keep it for
        good (a service created again under its name would find it in the way).
        """
        raw = self._transform(raw)
        key = object_key(raw)
        current = self.cache.get(key)
        meta = raw.get("metadata") or {}
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            if current is not None and _newer(raw, current):
                del self.cache[key]
            return
        if current is None or _newer(raw, current):
            self.cache[key] = raw

    def forget(self, key: ObjectKey, version: str) -> None:
        """Drop an object that this process just deleted, ahead of its watch event.

        Only the `version` it deleted: a newer one already in the cache (the object is
        terminating, waiting on a finalizer) stays, for the reconcilers that finalize it.
        """
        current = self.cache.get(key)
        if current is not None and _version(current) == version:
            del self.cache[key]


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
