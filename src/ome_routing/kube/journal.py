"""The journal's writer: an `events.k8s.io/v1` Event on the TrafficMap for each change.

Not OME's, and off unless `routing.journal.enabled` is true (chart `journal.enabled`):
without it the controller makes no Event request at all.

`Journal.record` is called by the routing reconciler after a map's spec was written,
with the changes `core.journal.changes` found. It never waits and never fails: each
change is logged at once (one structured line, `trafficmap entry changed`, with the
same facts as the Event), and its Event write is queued for `Journal.run`, a task of
the controller, which sends them one at a time through the controller's client (so
through the fencing gate, as every write of the leader). A write that fails is logged
(`journal event not written`) and dropped: the journal never blocks reconciliation.

Aggregation and the rate limit are `core.eventseries`'s: a repeat of an Event within
its series window updates `series.count` and `series.lastObservedTime` (a merge patch)
instead of creating an Event; every write takes a token of the map's bucket, and a
series update that finds none is sent by `run` once one is there. A series update that
finds its Event gone (404: the API server's `--event-ttl` passed) creates it again.

Sharded (`--sharding`), each write is sent inside `writing_for` of the shard tenure that
was in force when its change was recorded (`WRITING_FOR`, set around the reconcile that
recorded it), so it passes that shard's gate; a write whose tenure has ended by the time
it is sent is dropped (a debug line): the shard's new holder journals its own changes.

Event fields: `regarding` the TrafficMap, `reportingController`
`routing.ome-routing.io/placement-routing`, `reportingInstance` that name and the host's
(as client-go's `NewRecorder`), `action` `UpdateWeight`, `reason` the first cause,
`type` Normal or Warning, `note` the change's text, and the home and both weights in
annotations (`routing.ome-routing.io/home`, `.../previous-weight`, `.../weight`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from lightkube import ApiError, AsyncClient
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

from ome_routing.core.capacity import Window
from ome_routing.core.eventseries import Bucket, Series
from ome_routing.core.journal import (
    ACTION,
    ANNOTATION_HOME,
    ANNOTATION_PREVIOUS,
    ANNOTATION_WEIGHT,
    NO_EVIDENCE,
    REPORTING_CONTROLLER,
    Change,
    Evidence,
    changes,
    window_evidence,
)
from ome_routing.core.placement import PlacedHome
from ome_routing.core.ramps import RAMP_ANNOTATION, RampState, state_from_annotation
from ome_routing.core.trafficmap import PollingState
from ome_routing.kube.fencing import NotLeader
from ome_routing.kube.reconcile import Routed
from ome_routing.kube.sharding import WRITING_FOR, ShardLease, writing_for

log = logging.getLogger("ome_routing.journal")

#: how often `run` sends the series updates that waited for a token, and ends series
FLUSH_SECONDS = 10.0
#: client-go's `maxQueuedEvents`: writes queued beyond this are dropped
MAX_QUEUED = 1000
#: client-go's LRU of series (`maxLruCacheEntries`)
MAX_SERIES = 4096

#: (map UID, type, reason, action, note): what makes two Events the same
SeriesKey = tuple[str, str, str, str, str]


@dataclass(frozen=True, slots=True)
class MapRef:
    namespace: str
    name: str
    uid: str


@dataclass(slots=True)
class _Tracked:
    """One Event the journal wrote (or is writing), and what it was about."""

    ref: MapRef
    change: Change
    series: Series
    #: sharded: the shard tenure of the reconcile that last recorded it (None: unsharded)
    tenure: ShardLease | None = None


@dataclass(frozen=True, slots=True)
class _Write:
    key: SeriesKey
    #: None: create the Event; else the series count to write
    count: int | None
    #: sharded: the shard tenure it is written under (None: unsharded)
    tenure: ShardLease | None = None


def map_ref(tmap: Mapping[str, Any]) -> MapRef:
    meta = tmap.get("metadata") or {}
    return MapRef(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid")))


def evidence(
    placement_homes: Iterable[PlacedHome],
    windows: Mapping[str, Window | None],
    polling: PollingState,
    now: datetime,
) -> dict[str, Evidence]:
    """cluster -> what the reconciler knows of each home beyond its entry."""
    return {
        home.cluster: window_evidence(
            windows.get(home.cluster) if polling is PollingState.ON else None,
            now,
            home.plan_drained,
        )
        for home in placement_homes
    }


def ramp_state(tmap: Mapping[str, Any] | None) -> RampState | None:
    """The map's `routing.ome-routing.io/ramp` annotation (ours), read; None without one."""
    annotations = ((tmap or {}).get("metadata") or {}).get("annotations") or {}
    return state_from_annotation(annotations.get(RAMP_ANNOTATION))


def with_ramps(
    facts: dict[str, Evidence], now: RampState | None, before: RampState | None
) -> dict[str, Evidence]:
    """Each home's evidence with what the ramp annotation says of it after the write
    (`now`) and before it (`before`)."""
    if now is None:
        return facts
    out = dict(facts)
    for cluster, home in now.homes.items():
        was = before.homes.get(cluster) if before is not None else None
        out[cluster] = replace(
            out.get(cluster, NO_EVIDENCE),
            ramp_target=home.target,
            ramp_periods_left=home.periods_left,
            ramp_was_running=was is not None and was.periods_left > 0,
        )
    return out


def micro_time(moment: datetime) -> str:
    """Kubernetes' MicroTime: RFC 3339 with microseconds, in UTC."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Journal:
    """Events for a TrafficMap's changes, aggregated and rate-limited; use from one loop."""

    def __init__(
        self,
        client: AsyncClient,
        clock: Callable[[], datetime],
        *,
        instance: str | None = None,
    ) -> None:
        self._kube = client
        self._clock = clock
        self.instance = instance or f"{REPORTING_CONTROLLER.split('/')[-1]}-{socket.gethostname()}"
        self._tracked: dict[SeriesKey, _Tracked] = {}
        self._buckets: dict[str, Bucket] = {}
        self._queue: asyncio.Queue[_Write] = asyncio.Queue(MAX_QUEUED)

    # --- deciding (synchronous, from the reconciler) ------------------------------------

    def written(
        self,
        tmap: Mapping[str, Any],
        previous: Sequence[Mapping[str, Any]],
        routed: Routed,
        windows: Mapping[str, Window | None],
        previous_ramp: RampState | None = None,
    ) -> None:
        """A map's spec was written: journal what changed from `previous` entries (and,
        with a ramp, the map's ramp annotation before the write, `previous_ramp`). Never
        raises: a journal that fails is logged, and the reconcile goes on."""
        try:
            now = self._clock()
            current = (tmap.get("spec") or {}).get("entries") or []
            facts = evidence(routed.placement.homes, windows, routed.polling, now)
            facts = with_ramps(facts, ramp_state(tmap), previous_ramp)
            found = changes(previous, current, facts)
            if found:
                self.record(tmap, found, now)
        except Exception as err:
            log.error("journal event not written", extra={"error": _message(err)})

    def record(self, tmap: Mapping[str, Any], found: list[Change], now: datetime) -> None:
        """Log each change and queue its Event write; never waits, never raises."""
        ref = map_ref(tmap)
        for change in found:
            outcome = self._decide(ref, change, now)
            log.info(
                "trafficmap entry changed",
                extra={
                    "trafficmap": f"{ref.namespace}/{ref.name}",
                    "home": change.cluster,
                    "previousWeight": change.previous,
                    "weight": change.weight,
                    "reason": str(change.reason),
                    "type": change.type,
                    "note": change.note,
                    "event": outcome,
                },
            )

    def _take(self, uid: str, now: datetime) -> bool:
        bucket = self._buckets.get(uid) or Bucket.full(now)
        self._buckets[uid], given = bucket.take(now)
        return given

    def _decide(self, ref: MapRef, change: Change, now: datetime) -> str:
        """`created`, `series` (a repeat written), `series held` (a repeat that waits for
        a token) or `dropped` (a new Event with no token)."""
        key: SeriesKey = (ref.uid, change.type, str(change.reason), ACTION, change.note)
        tracked = self._tracked.get(key)
        if tracked is not None and tracked.series.open(now):
            tracked.series = tracked.series.repeat(now)
            tracked.tenure = WRITING_FOR.get()
            if self._take(ref.uid, now):
                self._write(key, tracked)
                return "series"
            return "series held"
        if not self._take(ref.uid, now):
            return "dropped"
        tenure = WRITING_FOR.get()
        self._tracked[key] = _Tracked(ref, change, Series(name="", first=now, last=now), tenure)
        self._put(_Write(key, None, tenure))
        if len(self._tracked) > MAX_SERIES:
            oldest = min(self._tracked, key=lambda k: self._tracked[k].series.last)
            del self._tracked[oldest]
        return "created"

    def _write(self, key: SeriesKey, tracked: _Tracked) -> None:
        tracked.series = tracked.series.wrote(tracked.series.count)
        self._put(_Write(key, tracked.series.count, tracked.tenure))

    def _put(self, write: _Write) -> None:
        try:
            self._queue.put_nowait(write)
        except asyncio.QueueFull:
            log.error(
                "journal event not written",
                extra={"note": write.key[4], "error": "too many queued events"},
            )

    def flush(self, now: datetime) -> None:
        """Queue the series updates that waited for a token; forget the ended series and
        the full buckets of maps that have none."""
        for key, tracked in list(self._tracked.items()):
            if tracked.series.behind and tracked.series.name:
                if self._take(key[0], now):
                    self._write(key, tracked)
            elif not tracked.series.open(now) and tracked.series.name:
                del self._tracked[key]
        active = {key[0] for key in self._tracked}
        for uid, bucket in list(self._buckets.items()):
            if uid not in active and bucket.level(now) >= bucket.burst:
                del self._buckets[uid]

    def series(self) -> dict[SeriesKey, Series]:
        """The series the journal follows (for tests and debugging)."""
        return {key: tracked.series for key, tracked in self._tracked.items()}

    # --- writing (the controller's task) ------------------------------------------------

    async def run(self) -> None:
        """Send the queued writes, one at a time; flush every `FLUSH_SECONDS`."""
        loop = asyncio.get_running_loop()
        next_flush = loop.time() + FLUSH_SECONDS
        while True:
            timeout = max(next_flush - loop.time(), 0.0)
            write: _Write | None = None
            with contextlib.suppress(TimeoutError):  # not wait_for: see `Prober._dispatch`
                async with asyncio.timeout(timeout):
                    write = await self._queue.get()
            if write is not None:
                await self._send(write)
            if loop.time() >= next_flush:
                self.flush(self._clock())
                next_flush = loop.time() + FLUSH_SECONDS

    async def _send(self, write: _Write) -> None:
        tracked = self._tracked.get(write.key)
        if tracked is None:
            return
        tenure = write.tenure
        if tenure is not None and tenure.ended:
            self._dropped(tracked, tenure)
            return
        try:
            with writing_for(tenure):
                if write.count is None:
                    await self._create(tracked, None)
                else:
                    await self._update(tracked, write.count)
        except asyncio.CancelledError:
            raise
        except NotLeader as err:
            if tenure is not None and tenure.ended:
                self._dropped(tracked, tenure)
                return
            self._not_written(tracked, err)
        except Exception as err:  # never fail the controller for its journal
            self._not_written(tracked, err)

    def _dropped(self, tracked: _Tracked, tenure: ShardLease) -> None:
        log.debug(
            "journal event dropped: its shard is no longer held",
            extra={
                "trafficmap": f"{tracked.ref.namespace}/{tracked.ref.name}",
                "note": tracked.change.note,
                "shard": tenure.shard,
            },
        )

    def _not_written(self, tracked: _Tracked, err: BaseException) -> None:
        log.error(
            "journal event not written",
            extra={
                "trafficmap": f"{tracked.ref.namespace}/{tracked.ref.name}",
                "note": tracked.change.note,
                "error": _message(err),
            },
        )

    async def _create(self, tracked: _Tracked, count: int | None) -> None:
        now = self._clock()
        ref, change = tracked.ref, tracked.change
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                # client-go's `GenerateEventName`
                "name": f"{ref.name}.{int(now.timestamp() * 1e9):x}",
                "namespace": ref.namespace,
                "annotations": {
                    ANNOTATION_HOME: change.cluster,
                    ANNOTATION_PREVIOUS: _or_none(change.previous),
                    ANNOTATION_WEIGHT: _or_none(change.weight),
                },
            },
            "eventTime": micro_time(tracked.series.first),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.instance,
            "action": ACTION,
            "reason": str(change.reason),
            "type": change.type,
            "note": change.note,
            "regarding": {
                "apiVersion": "ome.io/v1beta1",
                "kind": "TrafficMap",
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
            },
        }
        if count is not None and count > 1:
            body["series"] = {"count": count, "lastObservedTime": micro_time(tracked.series.last)}
        created = await self._kube.create(cast(Event, Event.from_dict(body)))
        name = created.metadata.name if created.metadata is not None else None
        tracked.series = replace(tracked.series, name=name or body["metadata"]["name"])

    async def _update(self, tracked: _Tracked, count: int) -> None:
        if not tracked.series.name:
            # its create has not landed: the count goes with the next flush
            tracked.series = replace(tracked.series, written=1)
            return
        patch = {"series": {"count": count, "lastObservedTime": micro_time(tracked.series.last)}}
        try:
            await self._kube.patch(
                Event,
                tracked.series.name,
                patch,
                namespace=tracked.ref.namespace,
                patch_type=PatchType.MERGE,
            )
        except ApiError as err:
            if err.status.code != 404:
                raise
            await self._create(tracked, count)  # the API server let it expire


def _or_none(value: int | None) -> str:
    return "" if value is None else str(value)


def _message(err: BaseException) -> str:
    if isinstance(err, ApiError):
        return f"{err.status.code} {err.status.reason}: {err.status.message}"
    return str(err) or type(err).__name__
