"""The caches that the routing controller and the publisher share while leading.

Both reconcilers read every InferenceService and every TrafficMap. Each used to list
and watch them itself, which held every object twice in memory and kept two watches of
each kind open. `SharedCaches` holds one informer per kind; each reconciler adds its
own handler (its work queue) before they run, and both read the same cache. Both write
TrafficMaps, and each puts what it wrote into the one cache (`Informer.remember`), so
each sees the other's writes no later than its own watch event would show them.

The informers keep the view both read (an InferenceService's routing view, a map
without managedFields), packed (`packing.PackedStore`); a lost watch or `410 Gone` lists again, as for an
informer of one's own.
"""

from __future__ import annotations

from lightkube import AsyncClient

from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing.kube.tasks import run_together
from ome_routing.kube.watching import WATCH_TIMING, Informer, WatchTiming


class SharedCaches:
    def __init__(self, client: AsyncClient, *, timing: WatchTiming = WATCH_TIMING) -> None:
        self.isvcs = Informer(
            client, InferenceService, None, namespaced=True, packed=True, timing=timing
        )
        self.maps = Informer(client, TrafficMap, None, namespaced=True, packed=True, timing=timing)

    @property
    def informers(self) -> tuple[Informer, ...]:
        return self.isvcs, self.maps

    async def run(self) -> None:
        """Keep both caches in step until cancelled."""
        await run_together(
            {"watch-InferenceService": self.isvcs.run(), "watch-TrafficMap": self.maps.run()}
        )
