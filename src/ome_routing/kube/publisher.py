"""The publisher: a second, leader-only reconciler that writes each TrafficMap to a route.

(One module of about 450 lines, on purpose: one reconciler whose steps, in OME's order,
share its queue, caches and journal; its inputs are read in `kube.publisher_inputs`, its
writes made in `kube.publishing`.)

It watches TrafficMaps and InferenceServices and reconciles one map at a time, in
OME's order (`core.publication_status` holds the conditions, `kube.publishing` the
writes):

1. The map is being deleted: finalize. Delete every claimed route (zero, delete,
   confirm) and the service's other objects, clear the journal, set the final
   conditions, remove the finalizer `ome.io/trafficmap-publisher`.
2. The map records publisher state (a journal, `published`, a `gatewayRef`, a realized
   generation) but has lost the finalizer: put it back and start over, before any
   other gate, so the routing controller can reap the map and this one finalize it.
   With routing off (the publisher is then inactive, as OME's) nothing else is done.
3. The owner: the map's controller is its InferenceService (same name and UID),
   `spec.service`, `status.sourceUID` (a new map without one is refused too, until the
   routing controller's first status) and `spec.observedISVCGeneration` agree with it;
   else `InvalidOwner`, with OME's error in the log.
4. A service that is deleting or no longer routed: its objects are withdrawn,
   `Unpublished`. A routed service whose placement intent OME's `ValidatePlacementIntent`
   refuses (an obsolete selector annotation, say): `Unpublished` in the status only, as
   OME's `markInactive`; the route stays as it was.
5. Per-service publisher options: `InvalidOptions`. The plan: `InvalidPlan`.
6. The finalizer and the claim (`status.publisher.claimedTargets`) are written before
   any object, so a map deleted at any point leaves nothing behind.
7. Preflight (`ClaimRejected`); then stale claims (a changed `routeNamespace`) are
   drained to weight 0 (`DrainFailed`) and kept until the map is deleted; then the apply
   (`ApplyFailed`), or the withdrawal when no gateway, port or host is set (`Withdrawn`).

A terminal failure (owner, options, plan, a foreign object or hostname) is recorded
and waits for a change or the resync (`routing.publisher.resyncInterval`); a transient
one (a failed read or write) is retried with a capped backoff. A map whose publication
(`core.publication.Publication`: the route, its weights, its backends) is the one its
last reconcile applied without error is not read or written again on every event:
the checks that need no API call run, but the preflight and the apply are skipped, so the
events that change nothing published (the echo of the publisher's own status write, the
routing controller's status write, an InferenceService's placement status) cost no round
trip and do not hold up a map whose weights did change. The resync forgets what was
applied, so every map is read and repaired then (our choice; OME reads again on every
event); sharded, every map of the shards held. Every failure is
logged as `TrafficMap publisher reconciliation failed`, with the real error; the
condition carries OME's generic message.

The publisher writes the map (its finalizer, its status) with the map's resourceVersion,
as field manager `ome-trafficmap-publisher` (OME's), so it never overwrites the routing
controller's newer conditions, nor a newer leader's; a conflict is retried at once, on the
map the cache holds by then. Its objects are fenced the same way (`kube.publishing`).

**Sharded** (ours, `--sharding`; `shards` given): it reconciles only the maps whose shard
this replica holds, each inside `writing_for(tenure)` of that shard, so its writes (the
map, the route, the backends) pass the shard's gate; the others are not read or written,
and what it kept of them (the publication applied, retries, metrics) is dropped. A shard
acquired brings its cached maps into the queue; a shard lost is let go after the
reconciles underway on it have finished (`kube.shardwork`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from ome_routing.core.config import OperatorConfig
from ome_routing.core.endpoint import BUILTIN_PUBLISHER
from ome_routing.core.publication import (
    InvalidPlan,
    Publication,
    parse_claim,
    plan_publication,
)
from ome_routing.core.publication_claims import (
    ClaimIndex,
    ClaimProblem,
    has_journal_of,
    own_journal,
)
from ome_routing.core.publication_objects import GATEWAY_GROUP
from ome_routing.core.publication_status import (
    FINALIZER,
    FINALIZING,
    PUBLISHED_OK,
    STATE_REMOVED,
    TRANSITIONING,
    UNPUBLISHED,
    WITHDRAWN,
    Outcome,
    Reason,
    claims_of,
    failure,
    needs_finalizer,
    publisher_status,
)
from ome_routing.kube import reconcile
from ome_routing.kube.caches import SharedCaches
from ome_routing.kube.controller import WRITE_GRACE_SECONDS, _finish_when_cancelled
from ome_routing.kube.publish_checks import PublishError
from ome_routing.kube.published import PublishedObjects
from ome_routing.kube.publisher_inputs import (
    intent_problem,
    meta,
    options,
    owner_problem,
    source,
    withdrawn,
)
from ome_routing.kube.publishing import FIELD_MANAGER, Publishing
from ome_routing.kube.resources import TrafficMap
from ome_routing.kube.shardwork import ShardOwner, ShardWork
from ome_routing.kube.watching import WATCH_TIMING, Informer, ObjectKey, RawObject, WatchTiming
from ome_routing.kube.workqueue import WorkQueue
from ome_routing.metrics import RoutingMetrics

log = logging.getLogger("ome_routing.publisher")

FAILED = "TrafficMap publisher reconciliation failed"
_RETRY_START = 1.0
_RETRY_MAX = 60.0


class _Conflict(Exception):
    """The map changed under a write; reconcile again with the new one."""


class Publisher:
    def __init__(
        self,
        client: AsyncClient,
        config: OperatorConfig,
        metrics: RoutingMetrics,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        caches: SharedCaches | None = None,
        timing: WatchTiming = WATCH_TIMING,
        shards: ShardOwner | None = None,
    ) -> None:
        self._kube = client
        self._config = config
        self._endpoint = config.endpoint
        self._metrics = metrics
        self._clock = clock
        #: the routes, Services (and slices, policies) the publisher reads, cached while it
        #: leads with routing on, as OME's cached client reads them (`kube.published`)
        self._objects = (
            PublishedObjects(client, config.endpoint, timing=timing)
            if config.routing_active
            else None
        )
        self._io = Publishing(client, config.endpoint, self._objects)
        self._queue: WorkQueue[ObjectKey] = WorkQueue()
        self._retries: dict[ObjectKey, int] = {}
        #: the TrafficMap and InferenceService caches: shared with the routing controller
        #: (and run by their owner) or, when none are given, its own (run by `run`)
        self._caches = caches
        if caches is not None:
            self._listen(caches)
        self._maps: Informer | None = None
        self._isvcs: Informer | None = None
        self._claims = ClaimIndex(BUILTIN_PUBLISHER)
        #: per map, the publication its last reconcile applied without error
        self._applied: dict[ObjectKey, Publication] = {}
        self.synced = asyncio.Event()
        #: sharded (`--sharding`): the maps whose shard this replica holds, else None
        self._shards = (
            ShardWork(
                shards,
                keys=self._cached_keys,
                enqueue=self._queue.add,
                drop=self._drop,
                grace=WRITE_GRACE_SECONDS,
                name="publisher",
            )
            if shards is not None
            else None
        )

    @property
    def informers(self) -> tuple[Informer, ...]:
        """The caches of what it publishes (for health: `kube.health`)."""
        return self._objects.informers if self._objects is not None else ()

    def _listen(self, caches: SharedCaches) -> None:
        caches.maps.add_handler(self._on_map_event)
        caches.isvcs.add_handler(self._on_isvc_event)

    async def run(self) -> None:
        caches = self._caches
        tasks: list[asyncio.Task[None]] = []
        if caches is None:
            caches = SharedCaches(self._kube)
            self._listen(caches)
            tasks.append(asyncio.create_task(caches.run(), name="publisher-watch"))
        if self._objects is not None:  # not awaited: reads go to the API server until listed
            tasks.append(asyncio.create_task(self._objects.run(), name="publisher-objects"))
        self._maps, self._isvcs = caches.maps, caches.isvcs
        try:
            await asyncio.gather(self._maps.synced.wait(), self._isvcs.synced.wait())
            # as many workers as the routing reconciler has (`maxConcurrentReconciles`): the
            # queue hands a map to one worker at a time, and a publish waits on the API
            for _ in range(max(1, self._config.observer.max_concurrent_reconciles)):
                tasks.append(asyncio.create_task(self._worker(), name="publisher"))
            tasks.append(asyncio.create_task(self._resync(), name="publisher-resync"))
            self.synced.set()
            log.info("TrafficMap publisher started", extra={"publisher": "gatewayapi"})
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._queue.close()

    def _on_map_event(self, key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        self._claims.observe_map(f"{key[0]}/{key[1]}", new)
        self._queue.add(key)

    def _on_isvc_event(self, key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        self._claims.observe_service(f"{key[0]}/{key[1]}", new)
        self._queue.add(key)

    async def _resync(self) -> None:
        if not self._config.routing_active:
            return  # an inactive publisher does not resync
        interval = max(self._config.resync_interval.nanoseconds / 1e9, 1.0)
        while True:
            await asyncio.sleep(interval)
            self._resync_now()

    def _resync_now(self) -> None:
        """Read and repair every map: what was applied is forgotten, and each is queued.
        Sharded, only the maps of the shards held: the others are their holders' to resync,
        and what this replica kept of them went with their shard (`ShardWork`), so a
        replica's resync costs its share of the maps, not all of them."""
        assert self._maps is not None
        self._applied.clear()
        shards = self._shards
        for key in list(self._maps.cache):
            if shards is None or shards.tenure(key) is not None:
                self._queue.add(key)

    def _cached_keys(self) -> list[ObjectKey]:
        maps = self._maps
        if maps is None and self._caches is not None:
            maps = self._caches.maps
        return list(maps.cache) if maps is not None else []

    def _drop(self, key: ObjectKey) -> None:
        """A map whose shard this replica does not hold: keep nothing of it, write nothing."""
        self._applied.pop(key, None)
        self._retries.pop(key, None)
        self._metrics.forget_publication(*key)

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            if self._shards is not None:
                await self._sharded_pass(key, self._shards)
                continue
            try:
                # a stopping worker finishes the reconcile it is in, as the routing one does
                await _finish_when_cancelled(self._reconciled(key), WRITE_GRACE_SECONDS)
                self._retries.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # one map must not stop the others
                self._failed(key, err)
            finally:
                self._queue.done(key)

    def _failed(self, key: ObjectKey, err: Exception) -> None:
        """A conflict is retried at once; another failure with a capped backoff."""
        self._applied.pop(key, None)
        if isinstance(err, _Conflict):
            self._queue.add_after(key, 0.05)
            return
        attempt = self._retries.get(key, 0)
        self._retries[key] = attempt + 1
        delay = min(_RETRY_START * 2**attempt, _RETRY_MAX)
        log.warning("publish TrafficMap %s/%s failed: %s", key[0], key[1], err)
        self._queue.add_after(key, delay)

    async def _sharded_pass(self, key: ObjectKey, shards: ShardWork) -> None:
        """One pass of a map, sharded: only under its shard's live tenure, fenced by it."""
        tenure = shards.tenure(key)
        if tenure is None:
            self._drop(key)
            self._queue.done(key)
            return
        try:
            with shards.working(key, tenure):
                # the tenure is in the context before the reconcile's task copies it
                await _finish_when_cancelled(self._reconciled(key), WRITE_GRACE_SECONDS)
            self._retries.pop(key, None)
            if self._maps is not None and key not in self._maps.cache:
                shards.forget(key, tenure)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # one map must not stop the others
            if shards.let_go(key, tenure, err):
                self._drop(key)
                return
            self._failed(key, err)
        finally:
            self._queue.done(key)

    # --- one map ----------------------------------------------------------------------

    async def _reconciled(self, key: ObjectKey) -> str:
        await self.reconcile(key)
        return "ok"

    async def reconcile(self, key: ObjectKey) -> None:
        assert self._maps is not None and self._isvcs is not None
        tmap = self._maps.cache.get(key)
        applied = self._applied.pop(key, None)
        if tmap is None:
            self._metrics.forget_publication(*key)
            return
        source_key = (key[0], key[1])
        if meta(tmap).get("deletionTimestamp"):
            await self._finalize(key, tmap, source_key)
            return
        if needs_finalizer(tmap.get("status") or {}) and FINALIZER not in (
            meta(tmap).get("finalizers") or []
        ):
            # claims record state outside the map: protect them before any gate can stop
            # this reconcile (OME repairs the finalizer first, and starts over)
            await self._finalizer(key, tmap)
            self._queue.add(key)
            return
        if not self._config.routing_active:
            return  # inactive (routing off): OME's publisher only finalizes
        isvc = self._isvcs.cache.get(key)
        problem = owner_problem(tmap, isvc, self._config)
        if problem is not None:
            await self._fail(key, tmap, Reason.INVALID_OWNER, problem, terminal=True)
            return
        assert isvc is not None
        status = tmap.get("status") or {}
        if meta(isvc).get("deletionTimestamp") or not reconcile.is_routed(isvc, self._config):
            _, changed = own_journal(status, BUILTIN_PUBLISHER)
            if changed is not None:
                await self._refuse(key, tmap, changed, Reason.PUBLISHER_CHANGED)
                return
            await self._withdraw_all(key, tmap, source_key, UNPUBLISHED)
            return
        if intent_problem(isvc) is not None:
            # OME's `markInactive`: only the status says so; the route stays as published
            _, changed = own_journal(status, BUILTIN_PUBLISHER)
            if changed is not None:
                await self._refuse(key, tmap, changed, Reason.PUBLISHER_CHANGED)
                return
            await self._status(key, tmap, UNPUBLISHED, published=False)
            self._metrics.set_publication_fallback(key[0], key[1], 0)
            return
        if not has_journal_of(status, BUILTIN_PUBLISHER):
            legacy = self._claims.legacy()
            if legacy is not None:
                await self._refuse(key, tmap, legacy)
                return
        extra = options(isvc)
        if extra:
            message = (
                "Gateway API publisher does not accept per-InferenceService options: "
                + ", ".join(extra)
            )
            await self._fail(key, tmap, Reason.INVALID_OPTIONS, message, terminal=True)
            return
        try:
            plan = plan_publication(
                source(isvc), key[0], key[1], tmap.get("spec") or {}, self._endpoint
            )
        except InvalidPlan as err:
            await self._fail(key, tmap, Reason.INVALID_PLAN, str(err), terminal=True)
            return
        if not plan.publish and withdrawn(tmap, plan):
            # nothing of ours can have come back: only the generation is recorded anew
            await self._status(
                key, tmap, WITHDRAWN, gateway_ref=None, published=False, observed=True
            )
            return
        tmap = await self._finalizer(key, tmap)
        status = tmap.get("status") or {}
        claims, claim_problem = own_journal(status, BUILTIN_PUBLISHER)
        if claim_problem is None:
            uid = str(meta(tmap).get("uid") or "")
            claim_problem = self._claims.collision(uid, [*claims, plan.claim])
        if claim_problem is not None:
            await self._refuse(key, tmap, claim_problem)
            return
        tmap = await self._claim(key, tmap, plan)
        try:
            if plan.publish and plan == applied:
                pass  # applied without error since: nothing to read or write (see above)
            elif plan.publish:
                seen = await self._io.preflight(plan, source_key)
                await self._drain_stale(tmap, plan, source_key)
                await self._io.apply(plan, source_key, seen)
            else:
                await self._drain_stale(tmap, plan, source_key)
                await self._io.withdraw_route(plan.route_namespace, plan.route_name, source_key)
                await self._io.delete_source_objects(plan.route_namespace, source_key)
        except PublishError as err:
            await self._fail(key, tmap, err.reason, str(err), terminal=err.terminal)
            return
        if plan.publish:
            self._applied[key] = plan
            ref = {
                "group": GATEWAY_GROUP,
                "kind": "HTTPRoute",
                "namespace": plan.route_namespace,
                "name": plan.route_name,
            }
            await self._status(
                key, tmap, PUBLISHED_OK, gateway_ref=ref, published=True, observed=True
            )
        else:
            await self._status(
                key, tmap, WITHDRAWN, gateway_ref=None, published=False, observed=True
            )
        self._metrics.set_publication_fallback(key[0], key[1], 0)

    async def _finalizer(self, key: ObjectKey, tmap: RawObject) -> RawObject:
        """The finalizer, before any claim or object is written."""
        finalizers = list(meta(tmap).get("finalizers") or [])
        if FINALIZER in finalizers:
            return tmap
        return await self._patch(
            key, tmap, {"metadata": {"finalizers": [*finalizers, FINALIZER]}}, status=False
        )

    async def _claim(self, key: ObjectKey, tmap: RawObject, plan: Publication) -> RawObject:
        """The claim in the journal (checked by OME's pre-claim rules), before any object."""
        status = tmap.get("status") or {}
        claims = claims_of(status)
        journal = status.get("publisher") or {}
        if plan.claim not in claims or journal.get("publisherName") != "gatewayapi":
            tmap = await self._status(key, tmap, TRANSITIONING, claims=[*claims, plan.claim])
        return tmap

    async def _drain_stale(
        self, tmap: RawObject, plan: Publication, source: tuple[str, str]
    ) -> None:
        for claim in claims_of(tmap.get("status") or {}):
            route = parse_claim(claim)
            if claim == plan.claim or route is None:
                continue
            await self._io.zero_route(route[0], route[1], source)

    async def _withdraw_all(
        self, key: ObjectKey, tmap: RawObject, source: tuple[str, str], outcome: Outcome
    ) -> None:
        """Delete every claimed route and the service's other objects (claims are kept)."""
        try:
            for claim in claims_of(tmap.get("status") or {}):
                route = parse_claim(claim)
                if route is None:
                    continue
                await self._io.withdraw_route(route[0], route[1], source)
                await self._io.delete_source_objects(route[0], source)
        except PublishError as err:
            await self._fail(key, tmap, err.reason, str(err), terminal=err.terminal)
            return
        await self._status(key, tmap, outcome, gateway_ref=None, published=False)

    async def _finalize(self, key: ObjectKey, tmap: RawObject, source: tuple[str, str]) -> None:
        finalizers = list(meta(tmap).get("finalizers") or [])
        if FINALIZER not in finalizers:
            return
        _, changed = own_journal(tmap.get("status"), BUILTIN_PUBLISHER)
        if changed is not None:  # another publisher's targets are not ours to remove
            await self._refuse(key, tmap, changed, Reason.PUBLISHER_CHANGED)
            return
        tmap = await self._status(key, tmap, FINALIZING)
        try:
            for claim in claims_of(tmap.get("status") or {}):
                route = parse_claim(claim)
                if route is None:
                    continue
                await self._io.withdraw_route(route[0], route[1], source)
                await self._io.delete_source_objects(route[0], source)
        except PublishError as err:
            log.error(
                "TrafficMap publisher finalization failed",
                extra={"trafficMap": f"{key[0]}/{key[1]}", "error": str(err)},
            )
            raise
        tmap = await self._status(
            key, tmap, STATE_REMOVED, claims=None, gateway_ref=None, published=False
        )
        status = dict(tmap.get("status") or {})
        if status.pop("observedTrafficMapGeneration", None) is not None:
            tmap = await self._patch(
                key, tmap, {"status": {"observedTrafficMapGeneration": None}}, status=True
            )
        remaining = [f for f in finalizers if f != FINALIZER]
        await self._patch(key, tmap, {"metadata": {"finalizers": remaining}}, status=False)
        self._metrics.forget_publication(*key)

    # --- status -----------------------------------------------------------------------

    async def _fail(
        self, key: ObjectKey, tmap: RawObject, reason: Reason, error: str, *, terminal: bool
    ) -> None:
        log.error(
            FAILED,
            extra={"trafficMap": f"{key[0]}/{key[1]}", "reason": str(reason), "error": error},
        )
        await self._status(key, tmap, failure(reason))
        self._metrics.set_publication_fallback(key[0], key[1], 0)
        if not terminal:
            raise RuntimeError(error)

    async def _refuse(
        self, key: ObjectKey, tmap: RawObject, problem: ClaimProblem, reason: Reason | None = None
    ) -> None:
        """A terminal journal or claim problem (`core.publication_claims`)."""
        await self._fail(key, tmap, reason or problem.reason, problem.error, terminal=True)

    async def _status(
        self, key: ObjectKey, tmap: RawObject, outcome: Outcome, **parts: Any
    ) -> RawObject:
        generation = int(meta(tmap).get("generation") or 0)
        old = tmap.get("status") or {}
        new = publisher_status(old, generation, outcome, self._clock(), **parts)
        if new == old:
            return tmap
        patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
        patch.update({k: None for k in old if k not in new})
        return await self._patch(key, tmap, {"status": patch}, status=True)

    async def _patch(
        self, key: ObjectKey, tmap: RawObject, body: dict[str, Any], *, status: bool
    ) -> RawObject:
        assert self._maps is not None
        version = meta(tmap).get("resourceVersion")
        body = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion": version}}
        try:
            patched = await self._kube.patch(
                TrafficMap.Status if status else TrafficMap,
                key[1],
                body,
                namespace=key[0],
                patch_type=PatchType.MERGE,
                field_manager=FIELD_MANAGER,
            )
        except ApiError as err:
            if err.status.code in (404, 409):
                raise _Conflict() from err
            raise
        raw: RawObject = dict(patched)
        self._maps.remember(raw)
        return raw
