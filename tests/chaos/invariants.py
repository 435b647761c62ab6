"""A recorder of every TrafficMap write, checking the controller's promises as each one lands.

`MapRecorder` watches the TrafficMaps of one namespace through the API server and looks at
every write as it arrives, not only at the end:

- `capacity.allocated` is never above the admitted replicas;
- a write that carries a reported ceiling never raises `capacity.allocated` (a report may
  lower a weight, never raise it; a home that starts over has no ceiling, so it may rise);
- a map of another owner is never written;
- every write is timestamped, so a test can count the writes made at rest (zero).

It outlives the API server: a broken watch resumes from the last resourceVersion it saw,
and a watch that ends with `410 Gone` lists again (counted in `relists`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube import ApiError, AsyncClient

from ome_routing.kube.resources import TrafficMap

Raw = dict[str, Any]


@dataclass(frozen=True)
class Write:
    at: float
    name: str
    resource_version: str
    #: the entries' fallback reasons in this write
    reasons: tuple[str, ...]


def entries(tmap: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The map's entries by cluster."""
    return {str(e.get("cluster")): e for e in (tmap.get("spec") or {}).get("entries") or [] if e}


#: The publisher's conditions: a reconciler of its own, which follows a new spec after the
#: routing controller has written it (OME shows that lag as the publisher's freshness).
PUBLISHER_CONDITIONS = ("Published", "PublicationFallback")


def half_written(tmap: Mapping[str, Any]) -> bool:
    """A map whose routing status was written for an older spec than the one it holds."""
    generation = int((tmap.get("metadata") or {}).get("generation") or 0)
    conditions = (tmap.get("status") or {}).get("conditions") or []
    return any(
        "observedGeneration" in c and int(c["observedGeneration"]) != generation
        for c in conditions
        if c.get("type") not in PUBLISHER_CONDITIONS
    )


@dataclass
class MapRecorder:
    client: AsyncClient
    namespace: str
    admitted: int
    #: names of maps this controller does not own: any write to them is a violation
    foreign: set[str] = field(default_factory=set)
    #: reporters whose counts go up: a ceiling may then rise with a report
    rises_allowed: bool = False
    maps: dict[str, Raw] = field(default_factory=dict)
    writes: list[Write] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    relists: int = 0
    _version: str | None = None
    _task: asyncio.Task[None] | None = None
    listed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __aenter__(self) -> MapRecorder:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.listed.wait(), 60)  # a deadline for a loaded machine
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    # -- what tests ask -----------------------------------------------------------------

    def writes_since(self, moment: float) -> list[Write]:
        return [w for w in self.writes if w.at >= moment]

    def owned(self) -> dict[str, Raw]:
        return {name: m for name, m in self.maps.items() if name not in self.foreign}

    # -- watching -----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                if self._version is None:
                    await self._relist()
                stream = self.client.watch(
                    TrafficMap, namespace=self.namespace, resource_version=self._version
                )
                async for kind, obj in stream:
                    raw = obj.to_dict()
                    self._version = raw["metadata"]["resourceVersion"]
                    name = raw["metadata"]["name"]
                    if kind == "DELETED":
                        self.maps.pop(name, None)
                    else:
                        self._record(name, raw)
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.status.code == 410:
                    self._version = None
                    self.relists += 1
                else:
                    await asyncio.sleep(0.2)
            except Exception:  # the API server is away: resume from the last version
                await asyncio.sleep(0.2)

    async def _relist(self) -> None:
        listing = self.client.list(TrafficMap, namespace=self.namespace)
        async for obj in listing:
            raw = obj.to_dict()
            name = raw["metadata"]["name"]
            seen = self.maps.get(name)
            if (
                seen is None
                or seen["metadata"]["resourceVersion"] != raw["metadata"]["resourceVersion"]
            ):
                self._record(name, raw, initial=not self.listed.is_set())
        self._version = listing.resourceVersion
        self.listed.set()

    def _record(self, name: str, new: Raw, *, initial: bool = False) -> None:
        old = self.maps.get(name)
        self.maps[name] = new
        if initial:
            return
        reasons = tuple(
            str(e["capacity"]["fallbackReason"])
            for e in entries(new).values()
            if (e.get("capacity") or {}).get("fallbackReason")
        )
        self.writes.append(
            Write(time.monotonic(), name, new["metadata"]["resourceVersion"], reasons)
        )
        if name in self.foreign:
            touched = foreign_write(old, new)
            if touched:
                self.violations.append(f"map {name} of another owner was written: {touched}")
            return
        same_map = old is not None and old["metadata"].get("uid") == new["metadata"].get("uid")
        before = entries(old) if old is not None and same_map else {}
        for cluster, entry in entries(new).items():
            capacity = entry.get("capacity") or {}
            allocated = int(capacity.get("allocated") or 0)
            if allocated > self.admitted:
                self.violations.append(
                    f"{name}/{cluster}: allocated {allocated} above admitted {self.admitted}"
                )
            previous = before.get(cluster)
            if previous is None or self.rises_allowed or "reported" not in capacity:
                continue
            was = int((previous.get("capacity") or {}).get("allocated") or 0)
            if allocated > was:
                self.violations.append(
                    f"{name}/{cluster}: a report raised allocated from {was} to {allocated}"
                )


#: what OME's publisher writes on a map whose owner it cannot trust: its own conditions
#: (`InvalidOwner`), nothing else
PUBLISHER_CONDITIONS = frozenset({"Published", "PublicationFallback"})


def foreign_write(old: Raw | None, new: Raw) -> str:
    """What a write changed of another owner's map beyond the publisher's `InvalidOwner`
    report (which OME's publisher writes on such a map too), or "" when nothing."""
    before: Raw = old or {}
    if new.get("spec") != before.get("spec", new.get("spec")):
        return "spec"
    for key in ("ownerReferences", "finalizers"):
        if (new["metadata"].get(key) or []) != (before.get("metadata", {}).get(key) or []):
            return f"metadata.{key}"
    status = new.get("status") or {}
    kinds = {c.get("type") for c in status.get("conditions") or []}
    if kinds - PUBLISHER_CONDITIONS:
        return f"conditions {sorted(str(k) for k in kinds - PUBLISHER_CONDITIONS)}"
    others = set(status) - {"conditions", "observedGeneration"}
    return f"status {sorted(others)}" if others else ""
