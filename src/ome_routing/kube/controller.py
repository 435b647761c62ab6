"""The routing controller: keeps one TrafficMap per routed InferenceService.

`Controller.run` is the leader's work. It lists and watches InferenceServices and
TrafficMaps (as OME's routing controller does: it never reads WorkloadClusters), polls every home through one `Observer`, and runs
`maxConcurrentReconciles` workers over a keyed work queue. Health probes run on a
`Prober` that shares the observer's client (its budget and connections); probe state,
unlike capacity windows, is restored from the map after a restart (`probing`). A reconcile asks
`reconcile.plan` what the service is, syncs the observer's homes, and writes the map's
spec and status only where they differ from what the API server holds, so a steady
state makes no writes. Every run starts with a fresh observer: a restart or a new
leader starts every home over with no readings. When it stops (shutdown or lost
leadership), each worker first finishes the reconcile it is in, so no map is left with a
new spec and an old status.

A home is the observer's by OME's key (`HomeKey`): the owner's UID, the map, the
cluster, the canonical endpoint and the capacity poll's digest. So a service deleted
and created again under the same name, a new endpoint, or any changed poll setting
starts the home over with an empty window, and the same endpoint spelled differently
(`HTTP://Host/` and `http://host`) does not. The homes of the services the caches hold
when a run starts are handed to the observer before it starts, so their first polls
are spread over a period; a home that appears later is polled at once, as OME does.

Errors: a bad spec freezes one map and an API failure fails one pass; both are logged
as OME's `Reconciler error` at every try and requeue the one key with a capped backoff
(`Refused` for the first); neither stops the controller.

**Sharded** (ours, `--sharding`; `shards` given): the controller does the work of the keys
whose shard this replica holds, and nothing of the others (`kube.shardwork`). A key whose
shard is not held is not reconciled: its homes leave the observer, its probes, shadow,
ramp state, retries and per-map metrics are dropped, and nothing of it is written. Every
reconcile runs inside `writing_for(tenure)` of its shard, so its writes (the map, its
status, the journal's Events, the shadow map) pass the shard's gate. A shard acquired
brings its cached keys into the queue; a shard lost is let go after the reconciles
underway on it have finished (for at most `WRITE_GRACE_SECONDS`), and a `NotLeader` of a
tenure that has ended drops the key quietly (a debug line), not as a `Reconciler error`.
Without `shards` the controller is the leader's, as above.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from functools import partial
from typing import Any

from lightkube import ApiError, AsyncClient

from ome_routing.core.config import OperatorConfig
from ome_routing.kube import ramping, reconcile
from ome_routing.kube.caches import SharedCaches
from ome_routing.kube.homes import HomeKey as HomeKey
from ome_routing.kube.homes import ServiceKey
from ome_routing.kube.homes import home_keys as home_keys
from ome_routing.kube.journal import Journal
from ome_routing.kube.journal import ramp_state as journal_ramp_state
from ome_routing.kube.mapwrites import Conflict, MapWrites
from ome_routing.kube.mapwrites import StaleSnapshot as StaleSnapshot
from ome_routing.kube.pollmetrics import PollMetrics
from ome_routing.kube.probing import ProbeTargets
from ome_routing.kube.reconcile import Frozen, NotOurs, Routed, Unrouted
from ome_routing.kube.resources import InferenceService
from ome_routing.kube.shadowing import ShadowMaps
from ome_routing.kube.shardwork import ShardOwner, ShardWork
from ome_routing.kube.watching import Informer, ObjectKey, RawObject
from ome_routing.kube.workqueue import WorkQueue
from ome_routing.metrics import RoutingMetrics
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.homes import wall_clock
from ome_routing.observer.observer import Observer
from ome_routing.observer.polling import PollClient
from ome_routing.observer.prober import Prober

log = logging.getLogger("ome_routing.controller")


class Refused(Exception):
    """A service whose map OME's reconcile refuses to write (a bad spec or annotation, a
    foreign map): its error, and the result it counts as in the reconcile metric."""

    def __init__(self, message: str, result: str) -> None:
        super().__init__(message)
        self.result = result


#: A full pass over every service, in case an event was lost (controller-runtime's
#: informers resync every 10 hours; this is ours, and cheap: a pass writes nothing at rest).
RESYNC_SECONDS = 600.0
#: How long a stopping worker may take to finish the writes of the reconcile it is in, so
#: that a shutdown or a lost leadership never leaves a map with a new spec and an old status.
#: With the election's renew deadline (10s) it stays within the Lease's duration (15s), so
#: a replica that lost the Lease has stopped writing before another one can take it.
WRITE_GRACE_SECONDS = 5.0
_RETRY_START = 1.0
_RETRY_MAX = 60.0


def flow_counts(budget: RequestBudget) -> list[tuple[str, int, int]]:
    """namespace, slots held, requests waiting: the budget's flows for its metrics."""
    return [(flow, use.held, use.waiting) for flow, use in budget.flows().items()]


class Controller:
    def __init__(
        self,
        client: AsyncClient,
        config: OperatorConfig,
        metrics: RoutingMetrics,
        *,
        clock: Callable[[], datetime] = wall_clock,
        poll_client_factory: Callable[[RequestBudget, int], PollClient] | None = None,
        caches: SharedCaches | None = None,
        shards: ShardOwner | None = None,
    ) -> None:
        self._kube = client
        self._config = config
        self._metrics = metrics
        self._clock = clock
        self._poll_client_factory = poll_client_factory or (
            lambda budget, limit: PollClient(budget, limit)
        )
        self._queue: WorkQueue[ServiceKey] = WorkQueue()
        #: the homes the observer holds of each service (a tuple: a set of three takes 3x)
        self._homes_of: dict[ServiceKey, tuple[HomeKey, ...]] = {}
        self._retries: dict[ServiceKey, int] = {}
        self._observer: Observer | None = None
        self._probes: ProbeTargets | None = None
        #: the InferenceService and TrafficMap caches: shared ones (run by their owner)
        #: or, when none are given, its own (run by `run`)
        self._caches = caches
        if caches is not None:
            self._listen(caches)
        self._isvcs: Informer | None = None
        self._maps: Informer | None = None
        self._writes: MapWrites | None = None
        #: the journal of weight changes (`routing.journal.enabled`; not OME's), else None
        self._journal: Journal | None = None
        #: the shadow policies' maps (`kube.shadowing`): no request without a shadow
        self._shadows = ShadowMaps(client, config, metrics, clock)
        self._ramps = ramping.Ramps(config)
        self.synced = asyncio.Event()
        #: sharded (`--sharding`): the keys whose shard this replica holds, else None
        self._shards = (
            ShardWork(
                shards,
                keys=self._cached_keys,
                enqueue=self._arrived,
                drop=self._drop,
                grace=WRITE_GRACE_SECONDS,
                name="placement-routing",
            )
            if shards is not None
            else None
        )

    def _listen(self, caches: SharedCaches) -> None:
        caches.isvcs.add_handler(self._on_isvc)
        caches.maps.add_handler(self._on_map)

    # --- running ----------------------------------------------------------------

    async def run(self) -> None:
        limits = self._config.observer
        budget = RequestBudget(limits.max_concurrent_requests)
        poll_client = self._poll_client_factory(budget, limits.max_response_bytes)
        self._metrics.budget_shares.watch(partial(flow_counts, budget))
        observer = Observer(
            poll_client,
            on_change=self._on_verdict_change,
            clock=self._clock,
            stats=PollMetrics(self._metrics),
        )
        self._observer = observer
        prober = Prober(
            poll_client,
            on_change=self._on_verdict_change,
            clock=self._clock,
            stats=PollMetrics(self._metrics),
        )
        self._probes = ProbeTargets(prober, self._clock)
        caches = self._caches
        own = caches is None
        if caches is None:
            caches = SharedCaches(self._kube)
            self._listen(caches)
        self._isvcs, self._maps = caches.isvcs, caches.maps
        self._writes = MapWrites(self._kube, caches.maps, self._metrics, self._clock)
        tasks: list[asyncio.Task[None]] = []
        try:
            if own:
                tasks.append(asyncio.create_task(caches.run(), name="watch-caches"))
            await asyncio.gather(self._isvcs.synced.wait(), self._maps.synced.wait())
            self._hold_existing_homes()
            await observer.start()
            await prober.start()  # after `_hold_existing_homes`: their first probes spread
            if self._config.journal:
                self._journal = Journal(self._kube, self._clock)
                tasks.append(asyncio.create_task(self._journal.run(), name="journal"))
            for _ in range(limits.max_concurrent_reconciles):
                tasks.append(asyncio.create_task(self._worker(), name="reconcile"))
            tasks.append(asyncio.create_task(self._resync(), name="resync"))
            self.synced.set()
            log.info("controller started", extra={"workers": limits.max_concurrent_reconciles})
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await prober.stop()
            await observer.stop()
            await poll_client.close()
            self._queue.close()
            self._metrics.homes.set(0)
            self._metrics.budget_shares.watch(None)

    def _hold_existing_homes(self) -> None:
        """Hand the observer the homes of every routed service before it starts.

        The observer spreads the first polls of the homes it holds when it starts; the
        reconciles that follow find them in place and keep their schedule.
        """
        assert self._isvcs is not None and self._maps is not None
        shards = self._shards
        for key in list(self._isvcs.cache):
            if shards is not None and shards.tenure(key) is None:
                continue  # another replica's (or nobody's yet)
            self._hold_homes(key)

    def _hold_homes(self, key: ServiceKey) -> None:
        """Hand the observer (and the prober) the homes of one routed service, as its
        reconcile would, without writing anything."""
        assert self._isvcs is not None and self._maps is not None
        isvc = self._isvcs.cache.get(key)
        if isvc is None:
            return
        tmap = self._maps.cache.get(key)  # one decode: a reconcile reads it once too
        try:
            decision = reconcile.plan(isvc, tmap, self._config)
        except Exception:  # the reconcile meets it again, and reports it
            return
        if isinstance(decision, Routed):
            self._sync_homes(key, decision)
            if self._probes is not None:
                self._probes.sync(key, decision, tmap)

    def _arrived(self, key: ServiceKey) -> None:
        """A key of a shard just acquired (sharded): its homes are polled at once, before
        its first pass, which so finds the first readings in (one map write the fewer,
        and the ceilings a period after the acquisition rather than after the key's wait
        in the queue); then its pass is queued. Before the controller has started, only
        queued: the start holds the homes of every key of a shard held then."""
        if self.synced.is_set():
            self._hold_homes(key)
        self._queue.add(key)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(RESYNC_SECONDS)
            self._enqueue_all()

    def _enqueue_all(self) -> None:
        assert self._isvcs is not None and self._maps is not None
        for key in {*self._isvcs.cache, *self._maps.cache}:
            self._queue.add(key)

    def _cached_keys(self) -> set[ServiceKey]:
        caches = self._caches
        if self._isvcs is not None and self._maps is not None:
            return {*self._isvcs.cache, *self._maps.cache}
        if caches is not None:
            return {*caches.isvcs.cache, *caches.maps.cache}
        return set()

    # --- events -----------------------------------------------------------------

    def _on_isvc(self, key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        self._queue.add(key)

    def _on_map(self, key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        self._queue.add(key)

    def _on_verdict_change(self, key: Any, verdict: object) -> None:
        """A home's capacity verdict or probe state changed: its map is looked at again."""
        self._queue.add((key.namespace, key.name))

    # --- the work loop ----------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            if self._shards is not None:
                await self._sharded_pass(key, self._shards)
                continue
            started = time.perf_counter()
            try:
                result = await _finish_when_cancelled(self.reconcile(key), WRITE_GRACE_SECONDS)
                self._retries.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # one key must not stop the others
                result = self._failed(key, err)
            finally:
                self._queue.done(key)
            self._metrics.reconciles.labels(result=result).inc()
            self._metrics.reconcile_duration.observe(time.perf_counter() - started)

    async def _sharded_pass(self, key: ServiceKey, shards: ShardWork) -> None:
        """One pass of a key, sharded: only under its shard's live tenure, fenced by it."""
        tenure = shards.tenure(key)
        if tenure is None:
            self._drop(key)
            self._queue.done(key)
            return
        started = time.perf_counter()
        try:
            with shards.working(key, tenure):
                # the tenure is in the context before the reconcile's task copies it
                result = await _finish_when_cancelled(self.reconcile(key), WRITE_GRACE_SECONDS)
            self._retries.pop(key, None)
            if not self._cached(key):
                shards.forget(key, tenure)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # one key must not stop the others
            if shards.let_go(key, tenure, err):
                self._drop(key)
                return
            result = self._failed(key, err)
        finally:
            self._queue.done(key)
        self._metrics.reconciles.labels(result=result).inc()
        self._metrics.reconcile_duration.observe(time.perf_counter() - started)

    def _cached(self, key: ServiceKey) -> bool:
        assert self._isvcs is not None and self._maps is not None
        return key in self._isvcs.cache or key in self._maps.cache

    def _failed(self, key: ServiceKey, err: Exception) -> str:
        """Log a failed pass as OME's `Reconciler error` and requeue it with backoff."""
        result = err.result if isinstance(err, Refused) else "error"
        attempt = self._retries.get(key, 0)
        self._retries[key] = attempt + 1
        delay = min(_RETRY_START * 2**attempt, _RETRY_MAX)
        log.error(
            "Reconciler error",
            extra={
                "controller": "placement-routing",
                "isvc": f"{key[0]}/{key[1]}",
                "error": _api_message(err),
                "retryIn": f"{delay:.0f}s",
            },
        )
        self._queue.add_after(key, delay)
        return result

    def _drop(self, key: ServiceKey) -> None:
        """A key whose shard this replica does not hold: keep nothing of it, write nothing."""
        if self._observer is not None:
            self._sync_homes(key, None)
        self._forget_probes(key)
        self._metrics.forget_map(key[0], key[1])
        self._shadows.drop(key)
        self._ramps.forget(key)
        self._retries.pop(key, None)

    async def reconcile(self, key: ServiceKey) -> str:
        """Bring one service's TrafficMap in line; returns how it ended, for metrics."""
        assert self._isvcs is not None and self._maps is not None and self._writes is not None
        namespace, name = key
        isvc = self._isvcs.cache.get(key)
        tmap = self._maps.cache.get(key)
        if isvc is None and tmap is not None:
            # an orphan is reaped only once the service is known to be gone, not on a miss
            isvc = await self._writes.read_live(InferenceService, key)
        decision = reconcile.plan(isvc, tmap, self._config)
        if isinstance(decision, Unrouted):
            self._sync_homes(key, None)
            self._forget_probes(key)
            self._metrics.forget_map(namespace, name)
            self._shadows.drop(key)
            if decision.problem is not None:
                raise Refused(decision.problem, "skipped")
            if decision.delete_map and tmap is not None:
                return await self._delete(key, tmap)
            return "skipped"
        if isinstance(decision, NotOurs | Frozen):
            # OME writes nothing on either (the last spec and conditions stay), and returns
            # the error: logged as a `Reconciler error` and retried with backoff
            self._sync_homes(key, None)
            self._forget_probes(key)
            self._metrics.forget_map(namespace, name)
            raise Refused(decision.message, "frozen" if isinstance(decision, Frozen) else "skipped")
        assert isvc is not None
        try:
            return await self._reconcile_routed(key, decision, isvc, tmap)
        except Conflict:
            return await self._start_over(key)

    async def _reconcile_routed(
        self, key: ServiceKey, routed: Routed, isvc: RawObject, tmap: RawObject | None
    ) -> str:
        namespace, name = key
        homes = self._sync_homes(key, routed)
        observer = self._observer
        assert observer is not None
        verdicts = {cluster: observer.verdict(home) for cluster, home in homes.items()}
        assert self._probes is not None
        probes = self._probes.sync(key, routed, tmap)
        view = reconcile.build_view(routed, verdicts, probes)
        # ours, opt-in: the ramped weights, last (the conditions stay the targets')
        ramp = self._ramps.apply(key, isvc, tmap, routed, view, self._clock())
        view = ramp.view
        spec = reconcile.desired_spec(name, routed, view)
        marks = ramp.annotation_patch(tmap)
        writes = self._writes
        assert writes is not None
        if routed.placement.plan_id:
            # OME's fence runs on every pass with a plan ID (inside its CreateOrUpdate),
            # so a stale snapshot writes neither the spec nor the status
            await writes.fence_plan(key, isvc)
        if tmap is not None and tmap.get("spec") == spec and marks:
            tmap = await writes.patch_spec(key, ramping.annotations_only(tmap, marks))
        if tmap is None or tmap.get("spec") != spec:
            previous = ((tmap or {}).get("spec") or {}).get("entries") or []
            previous_ramp = journal_ramp_state(tmap) if self._journal is not None else None
            if tmap is None:
                tmap = await writes.create(key, routed.uid, spec, marks)
                operation = "created"
            else:
                patch = ramping.with_annotations(reconcile.spec_patch(tmap, spec), marks)
                tmap = await writes.patch_spec(key, patch)
                operation = "updated"
            log.info(
                "trafficmap generated",
                extra={
                    "isvc": f"{namespace}/{name}",
                    "op": operation,
                    "mode": spec.get("mode", ""),
                    "homes": len(spec.get("entries") or ()),
                },
            )
            if self._journal is not None:
                windows = {cluster: observer.window(home) for cluster, home in homes.items()}
                self._journal.written(tmap, previous, routed, windows, previous_ramp)
        await writes.status(key, tmap, routed.uid, reconcile.routed_conditions(view))
        self._metrics.set_fallback_homes(
            namespace, name, view.fallback_homes if routed.poll is not None else None
        )
        self._metrics.set_gated_homes(
            namespace, name, self._probes.gated(probes) if routed.probe is not None else None
        )
        shadowed = await self._shadows.sync(
            key,
            isvc,
            routed,
            view,
            lambda c: observer.window(homes[c]) if c in homes else None,
            probes,
            tmap,
        )
        if shadowed and routed.poll is not None:
            # a poll that moves no live verdict wakes nothing, and the shadow reads each one
            self._queue.add_after(key, routed.poll.period.seconds)
        if ramp.requeue_after is not None:  # the ramp's next step
            self._queue.add_after(key, ramp.requeue_after)
        return "ok"

    def _forget_probes(self, key: ServiceKey) -> None:
        if self._probes is not None:
            self._probes.forget(key)

    # --- observer homes ---------------------------------------------------------

    def _sync_homes(self, key: ServiceKey, routed: Routed | None) -> dict[str, HomeKey]:
        """Make the observer's homes of one service the ones it polls now; cluster -> key."""
        observer = self._observer
        assert observer is not None
        poll = routed.poll if routed is not None else None
        wanted = home_keys(key, routed)
        keep = set(wanted.values())
        held = self._homes_of.get(key, ())
        for home in set(held) - keep:
            observer.remove_home(home)
        if poll is not None and keep:
            for home in keep:
                observer.set_home(home, home.endpoint, poll, home.namespace)
            # the keys held stay when they are the same homes: they are the observer's
            # own, where every reconcile's keys are new copies of them
            if keep != set(held):
                self._homes_of[key] = tuple(keep)
        else:
            self._homes_of.pop(key, None)
        self._metrics.homes.set(len(observer))
        return wanted

    # --- writes -----------------------------------------------------------------

    async def _start_over(self, key: ServiceKey) -> str:
        """A write met a newer map, or none: read it, and reconcile again at once from it."""
        assert self._writes is not None
        await self._writes.refresh(key)
        self._queue.add(key)
        return "conflict"

    async def _delete(self, key: ServiceKey, tmap: RawObject) -> str:
        assert self._writes is not None
        try:
            await self._writes.delete(key, tmap)
        except Conflict:
            return await self._start_over(key)
        log.info("deleted TrafficMap %s/%s", key[0], key[1])
        return "deleted"


async def _finish_when_cancelled(work: Coroutine[Any, Any, str], grace: float) -> str:
    """Run `work`; when cancelled, let it finish (for at most `grace` s), then stop.

    A worker is cancelled more than once as it stops: through the `gather` that runs the
    workers, and again by the stopping reconciler's own `finally` (the controller's or the
    publisher's), which runs as soon as one idle worker (or the resync) has ended and so
    ended that `gather`. A later cancellation does not cut
    the grace short (`asyncio.wait_for` would pass it on to `work`): a reconcile between
    its spec write and its status write must reach the status, or the map is left with
    conditions of the spec before.

    The task is let go of on the way out: a failed task keeps its error, whose traceback
    holds this frame, and this frame holding the task would make a cycle that only a full
    collection frees (the task lived through the reconcile's requests, so the collector
    has moved it to its oldest generation).
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await _outlast(task, grace)
        raise
    finally:
        del task


async def _outlast(task: asyncio.Future[Any], grace: float) -> None:
    """Wait for `task` for at most `grace` s, through any cancellation; then cancel it.
    Its outcome is read (and dropped): the worker stopping reports nothing of it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while not task.done() and (left := deadline - loop.time()) > 0:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((task,), timeout=left)
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((task,))
    if task.done() and not task.cancelled():
        task.exception()


def _api_message(err: BaseException) -> str:
    if isinstance(err, ApiError):
        return f"{err.status.code} {err.status.reason}: {err.status.message}"
    return str(err) or type(err).__name__
