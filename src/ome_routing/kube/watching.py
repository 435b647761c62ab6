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
A page is 100 objects rather than the reflector's 500: a page's body and its decoded
objects are the list's peak, which the process keeps as resident memory after the list
(Python seldom gives freed memory back); 100 a page lowers the peak of a list of 2,400
InferenceServices by about 7 MiB for a few more requests (`bench/list_pages`).

One informer may serve several reconcilers (`add_handler`): the routing controller and
the publisher share one watch and one cache of each kind they both read, rather than
holding every map and service twice.

An informer may be limited by a label selector (`labels`) and, for a namespaced kind, to
one namespace (`namespace`; by default it lists and watches every namespace).

**A watch never stalls unnoticed.** The API side is not trusted to speak up: a watch
connection that dies without a reset (a NAT or load balancer that drops idle flows, an
API server that hangs) would otherwise freeze the cache while every fresh request still
works. So, as client-go's reflector: each watch request asks the server to end it after a
random 5 to 10 minutes (`timeoutSeconds`, `MIN_WATCH_TIMEOUT * (1 + rand)`), and the next
one resumes from the last resourceVersion seen, without a list; each asks for bookmarks
(`allowWatchBookmarks`), which kube-apiserver sends about once a minute and which only
advance that resourceVersion; and a watch that brings nothing at all, not even a
bookmark, for `idle_timeout` (`WATCH_IDLE_TIMEOUT`) ends, and the informer lists again.
The idle bound is the watch request's read timeout, so it costs nothing per event.

Health: `dead(now)` is true when the informer has listed once, nothing has come from the
API server for longer than `idle_timeout`, and its last list failed: what `/healthz`
reports (`kube.health`). A kind that never listed (not served) is not counted dead; it
shows as not ready instead.

Errors: `run` never raises except on cancellation. A watch that fails (a dropped
connection, `410 Gone`, any API error) or stays silent past its bound (`SilentWatch`)
ends, and the informer lists again; a failed list is logged and retried with a capped
backoff.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable, MutableMapping
from dataclasses import dataclass
from sys import intern
from typing import Any

import httpx2
import msgspec
from lightkube import AsyncClient

from ome_routing.kube import lightkube_adapter
from ome_routing.kube.lightkube_adapter import ALL_NAMESPACES
from ome_routing.kube.packing import PackedStore

log = logging.getLogger(__name__)

ObjectKey = tuple[str, str]
RawObject = dict[str, Any]
#: (key, old, new): old is None for an addition, new is None for a deletion.
OnEvent = Callable[[ObjectKey, RawObject | None, RawObject | None], None]

#: Objects per page of a list (client-go's reflector reads 500: see the module docstring).
LIST_PAGE = 100
_BACKOFF_START = 0.5
_BACKOFF_MAX = 30.0
#: client-go's reflector `minWatchTimeout`: each watch request asks the server to end it
#: after this long times (1 + a random fraction), so 5 to 10 minutes
MIN_WATCH_TIMEOUT = 300.0
#: How long a watch may bring nothing, not even a bookmark, before it is taken for dead and
#: the informer lists again. kube-apiserver sends a watch that asks for bookmarks one about
#: every minute, so a live watch is never this quiet; a dead one is found within it.
WATCH_IDLE_TIMEOUT = 150.0


@dataclass(frozen=True)
class WatchTiming:
    """How long a watch may be silent, and how long its requests last (tests shorten both)."""

    #: `WATCH_IDLE_TIMEOUT`
    idle_timeout: float = WATCH_IDLE_TIMEOUT
    #: `MIN_WATCH_TIMEOUT`
    min_watch_timeout: float = MIN_WATCH_TIMEOUT


#: client-go's timings
WATCH_TIMING = WatchTiming()


class SilentWatch(Exception):
    """A watch brought nothing, not even a bookmark, for longer than its idle bound."""


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
        labels: dict[str, Any] | None = None,
        namespace: str | None = None,
        timing: WatchTiming = WATCH_TIMING,
        rng: random.Random | None = None,
    ) -> None:
        self._kube = client
        #: of a namespaced kind, the one namespace listed and watched (None: every one)
        self._namespace = namespace
        #: a label selector for the list and every watch (lightkube's `labels`)
        self._labels = labels
        #: see `WATCH_IDLE_TIMEOUT` and `MIN_WATCH_TIMEOUT`
        self.idle_timeout = timing.idle_timeout
        self._min_watch_timeout = timing.min_watch_timeout
        self._rng = rng or random.Random()
        #: when (the event loop's clock) the API server last answered: a list, or a line of
        #: a watch (an event or a bookmark); None before the first
        self.heard_at: float | None = None
        #: whether the last list failed (cleared by one that succeeds)
        self.list_failing = False
        self.kind: str = lightkube_adapter.kind_of(resource)
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

    def dead(self, now: float) -> bool:
        """Whether the informer has listed before, has heard nothing from the API server for
        longer than its idle bound (at `now`, the event loop's clock), and cannot list."""
        heard = self.heard_at
        return (
            self.synced.is_set()
            and self.list_failing
            and heard is not None
            and now - heard > self.idle_timeout
        )

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
            except SilentWatch as err:  # a dead connection, most likely: list again at once
                log.warning("watch of %s ended: %s; listing again", self.kind, err)
                continue
            except Exception as err:  # any failure means: list again
                log.warning(
                    "watch of %s ended: %s; listing again in %.1fs", self.kind, _short(err), backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX)

    def _note_heard(self) -> None:
        self.heard_at = asyncio.get_running_loop().time()

    async def _relist(self) -> str:
        try:
            version = await self._list_into_new_cache()
        except BaseException:
            self.list_failing = True
            raise
        self.list_failing = False
        self._note_heard()
        return version

    async def _list_into_new_cache(self) -> str:
        selector: dict[str, Any] = {} if self._labels is None else {"labels": self._labels}
        listing = (
            self._kube.list(
                self._resource,
                namespace=self._namespace or ALL_NAMESPACES,
                chunk_size=self._page,
                **selector,
            )
            if self._namespaced
            else self._kube.list(self._resource, chunk_size=self._page, **selector)
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

    def watch_timeout(self) -> int:
        """The `timeoutSeconds` of the next watch request: 5 to 10 minutes, as client-go's."""
        return max(1, int(self._min_watch_timeout * (1 + self._rng.random())))

    async def _watch(self, version: str) -> None:
        """Watch from `version` until a watch fails; a watch the server ends (its
        `timeoutSeconds` passed) is followed by the next from the last version seen."""
        while True:
            async for event_type, obj in self._request_watch(version, self.watch_timeout()):
                version = _version(obj) or version
                if event_type == "BOOKMARK":
                    continue  # it only moves the version on
                raw = self._transform(obj)
                key = object_key(raw)
                previous = self.cache.get(key)
                if event_type == "DELETED":
                    self.cache.pop(key, None)
                    self._on_event(key, previous, None)
                elif event_type in ("ADDED", "MODIFIED"):
                    self.cache[key] = raw
                    self._on_event(key, previous, raw)

    async def _request_watch(
        self, version: str, timeout_seconds: int
    ) -> AsyncIterator[tuple[str, RawObject]]:
        """One watch request from `version`: its events (bookmarks too) until the server ends
        it; raises `SilentWatch` past the idle bound, `ApiError` on an error event or answer.

        lightkube's `watch` neither asks for bookmarks nor sets a read timeout, and it sends
        every request again with the same `timeoutSeconds`; so the request is built with its
        request builder (the path, the auth, the client's gate) and read here.
        """
        params: dict[str, Any] = {
            "resourceVersion": version,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true",
        }
        if self._labels:
            params["labelSelector"] = lightkube_adapter.label_selector(self._labels)
        # the read timeout is the idle bound: a watch that sends no byte for that long ends
        response = await lightkube_adapter.open_watch(
            self._kube,
            self._resource,
            all_namespaces=self._namespaced and self._namespace is None,
            namespace=self._namespace,
            params=params,
            read_timeout=self.idle_timeout,
        )
        try:
            if response.status_code != 200:
                await response.aread()
                lightkube_adapter.raise_for_status(response)
            lines = response.aiter_lines()
            while True:
                try:
                    line = await anext(lines)
                except StopAsyncIteration:
                    return
                except httpx2.ReadTimeout:
                    raise SilentWatch(
                        f"nothing, not even a bookmark, for {self.idle_timeout:g}s"
                    ) from None
                self._note_heard()
                if not line:
                    continue
                event_type, event_object = lightkube_adapter.watch_event(line)
                obj = msgspec.json.decode(event_object)
                if isinstance(obj, dict):
                    yield event_type, obj
        finally:
            await response.aclose()

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
