"""TrafficMaps seen from outside the replicas (for `run.py`).

- `Ceilings`: a watch of every TrafficMap from now, and per map when its window started
  over (a write with a home without `capacity.reported`) and when, after that, every home
  had a ceiling again: a fresh ceiling, from whichever replica holds the map's shard.
- `ChangeTrials`: a fast-poll service's reporter changes its count; the seconds until the
  service's map shows it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.core.generic_client import ALL_NS

from ome_routing.kube.resources import TrafficMap

Key = tuple[str, str]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def all_reported(tmap: Any) -> bool:
    """Whether the map has homes and every one of them has a ceiling."""
    entries = (tmap.get("spec") or {}).get("entries") or []
    return bool(entries) and all("reported" in (e.get("capacity") or {}) for e in entries)


class Ceilings:
    """Per map, when its window started over and when it next had every ceiling again."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self.lost_at: dict[Key, float] = {}
        self.fresh_at: dict[Key, float] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # the store's revision now: the first page of a list of one map
        listing = self._client.list(TrafficMap, namespace=ALL_NS, chunk_size=1)
        async for _ in listing:
            break
        self._task = asyncio.create_task(self._watch(listing.resourceVersion))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self, revision: str | None) -> None:
        while True:
            try:
                async for _kind, obj in self._client.watch(
                    TrafficMap, namespace=ALL_NS, resource_version=revision
                ):
                    now = time.monotonic()
                    meta = obj.get("metadata") or {}
                    key = (str(meta.get("namespace")), str(meta.get("name")))
                    revision = meta.get("resourceVersion")
                    if not all_reported(obj):
                        self.lost_at.setdefault(key, now)
                    elif key in self.lost_at:
                        self.fresh_at.setdefault(key, now)
            except (ApiError, httpx2.HTTPError) as err:
                log(f"watching TrafficMaps: {err}; watching again")


class ChangeTrials:
    """Changes one home's count of a fast-poll service and times it to the service's map."""

    def __init__(
        self, client: AsyncClient, reporter: Any, namespace: str, clusters: tuple[str, ...]
    ) -> None:
        self._client = client
        #: bench/controller_scale's ChangingReporter: `counts` and `awaiting` by home
        self._reporter = reporter
        self._namespace = namespace
        self._clusters = clusters
        self._seen: dict[tuple[str, int], float] = {}
        self._task: asyncio.Task[None] | None = None
        self._trials = 0

    async def start(self) -> None:
        listing = self._client.list(TrafficMap, namespace=self._namespace)
        async for _ in listing:
            pass
        self._task = asyncio.create_task(self._watch(listing.resourceVersion))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self, revision: str | None) -> None:
        while True:
            try:
                async for _kind, obj in self._client.watch(
                    TrafficMap, namespace=self._namespace, resource_version=revision
                ):
                    revision = obj["metadata"]["resourceVersion"]
                    name = obj["metadata"]["name"]
                    for entry in (obj.get("spec") or {}).get("entries") or []:
                        value = (entry.get("capacity") or {}).get("reported")
                        home = (f"{name}-{entry['cluster']}", value)
                        if home in self._reporter.awaiting:
                            self._seen.setdefault(home, time.monotonic())
            except (ApiError, httpx2.HTTPError) as err:
                log(f"watching the fast-poll TrafficMaps: {err}; watching again")

    async def trial(self, name: str, limit: float = 60.0) -> float:
        """Seconds from a new count at one home of `name` to its map showing it."""
        self._trials += 1
        home = f"{name}-{self._clusters[self._trials % len(self._clusters)]}"
        value = 1 + self._trials % 3  # below the admitted 4, so that it shows as reported
        if self._reporter.counts.get(home, 4) == value:
            value = 1 + value % 3
        key = (home, value)
        self._reporter.awaiting.add(key)
        changed = time.monotonic()
        self._reporter.counts[home] = value
        try:
            while key not in self._seen:
                if time.monotonic() - changed > limit:
                    raise SystemExit(f"no write for {home} = {value} within {limit:.0f}s")
                await asyncio.sleep(0.01)
            return self._seen[key] - changed
        finally:
            self._reporter.awaiting.discard(key)
            self._seen.pop(key, None)
