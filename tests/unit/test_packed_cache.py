"""The shared caches hold each object packed: every read is an equal copy of its own."""

from __future__ import annotations

from typing import Any, cast

from lightkube import AsyncClient

from ome_routing.kube.caches import SharedCaches
from ome_routing.kube.packing import PackedStore


def a_map() -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "svc", "resourceVersion": "7", "generation": 2},
        "spec": {
            "service": "svc",
            "entries": [{"cluster": "worker-a", "weight": 3, "capacity": {"reported": 1.5}}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "flag": None},
    }


def test_a_packed_object_reads_back_equal_and_a_change_to_a_read_stays_out_of_the_cache() -> None:
    store = PackedStore()
    store[("ns", "svc")] = a_map()
    read = store[("ns", "svc")]
    assert read == a_map()
    read["spec"]["entries"][0]["weight"] = 0
    assert store[("ns", "svc")] == a_map()
    assert store.get(("ns", "other")) is None
    assert list(store) == [("ns", "svc")] and ("ns", "svc") in store and len(store) == 1
    del store[("ns", "svc")]
    assert not store


def test_the_shared_caches_of_maps_and_services_are_packed() -> None:
    caches = SharedCaches(cast(AsyncClient, None))
    caches.maps.remember(a_map())
    assert isinstance(caches.maps.cache, PackedStore)
    assert isinstance(caches.isvcs.cache, PackedStore)
    assert caches.maps.cache[("ns", "svc")] == a_map()
