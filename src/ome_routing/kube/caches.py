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

import asyncio

from lightkube import AsyncClient

from ome_routing.kube.resources import InferenceService, TrafficMap
from ome_routing.kube.watching import Informer


class SharedCaches:
    def __init__(self, client: AsyncClient) -> None:
        self.isvcs = Informer(client, InferenceService, None, namespaced=True, packed=True)
        self.maps = Informer(client, TrafficMap, None, namespaced=True, packed=True)

    async def run(self) -> None:
        """Keep both caches in step until cancelled."""
        await asyncio.gather(
            asyncio.create_task(self.isvcs.run(), name="watch-InferenceService"),
            asyncio.create_task(self.maps.run(), name="watch-TrafficMap"),
        )
