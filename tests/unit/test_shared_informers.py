"""One informer serving both reconcilers: every handler hears each event, and a deletion by
one reconciler does not hide a terminating object from the other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from lightkube import AsyncClient

from ome_routing.kube.resources import TrafficMap
from ome_routing.kube.watching import Informer, ObjectKey, RawObject


def a_map(version: str, **meta: Any) -> RawObject:
    return {
        "metadata": {"namespace": "ns", "name": "svc", "resourceVersion": version, **meta},
        "spec": {"service": "svc"},
    }


class _Listing:
    def __init__(self, objects: list[RawObject]) -> None:
        self._objects = objects
        self.resourceVersion = "10"

    def __aiter__(self) -> AsyncIterator[RawObject]:
        return self._each()

    async def _each(self) -> AsyncIterator[RawObject]:
        for obj in self._objects:
            yield obj


class _Client:
    """Lists the given objects."""

    def __init__(self, listed: list[RawObject]) -> None:
        self._listed = listed

    def list(self, resource: Any, **_: Any) -> _Listing:
        return _Listing(self._listed)


class _OneEventInformer(Informer):
    """Its watch brings one modification, then waits (the watch's HTTP is tested on a real
    server in tests/integration/test_informer_watches.py)."""

    def __init__(self, client: _Client, modified: RawObject) -> None:
        super().__init__(cast(AsyncClient, client), TrafficMap, None, namespaced=True)
        self._modified = modified
        self.watches = 0

    async def _request_watch(
        self, version: str, timeout_seconds: int
    ) -> AsyncIterator[tuple[str, RawObject]]:
        self.watches += 1
        yield "MODIFIED", self._modified
        await asyncio.Event().wait()


Heard = list[tuple[ObjectKey, str | None, str | None]]


def version(obj: RawObject | None) -> str | None:
    return None if obj is None else str(obj["metadata"]["resourceVersion"])


def recorder(heard: Heard) -> Any:
    def on_event(key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        heard.append((key, version(old), version(new)))

    return on_event


async def test_every_handler_of_one_informer_hears_the_list_and_each_watch_event() -> None:
    informer = _OneEventInformer(_Client([a_map("5")]), a_map("6"))
    first: Heard = []
    second: Heard = []
    informer.add_handler(recorder(first))
    informer.add_handler(recorder(second))
    running = asyncio.create_task(informer.run())
    try:
        while len(second) < 2:
            await asyncio.sleep(0)
    finally:
        running.cancel()
    expected = [(("ns", "svc"), None, "5"), (("ns", "svc"), "5", "6")]
    assert first == expected
    assert second == expected
    assert informer.watches == 1


def test_a_deleted_map_that_is_already_terminating_stays_cached_for_its_finalizer() -> None:
    informer = Informer(cast(AsyncClient, None), TrafficMap, None, namespaced=True)
    informer.remember(a_map("5"))
    # the watch showed the deletion's new version (a finalizer holds the map) before the
    # delete call returned: dropping the version that was deleted leaves the newer one
    informer.remember(
        a_map(
            "6",
            deletionTimestamp="2026-01-01T00:00:00Z",
            finalizers=["ome.io/trafficmap-publisher"],
        )
    )
    informer.forget(("ns", "svc"), "5")
    assert informer.cache[("ns", "svc")]["metadata"]["resourceVersion"] == "6"
    informer.forget(("ns", "svc"), "6")
    assert ("ns", "svc") not in informer.cache


def test_a_write_that_took_the_last_finalizer_off_a_deleted_map_does_not_bring_it_back() -> None:
    informer = Informer(cast(AsyncClient, None), TrafficMap, None, namespaced=True)
    gone = a_map("7", deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[])
    # its DELETED event came before the write's answer: the cache no longer holds it
    informer.remember(gone)
    assert ("ns", "svc") not in informer.cache
    # or it came after: the version the write replaced is dropped too
    informer.remember(a_map("6", deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["f"]))
    informer.remember(gone)
    assert ("ns", "svc") not in informer.cache
