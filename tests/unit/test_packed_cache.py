"""The shared caches hold each object packed: every read is an equal copy of its own, and
objects of one kind are held compressed against each other's common bytes."""

from __future__ import annotations

import marshal
import uuid
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


def a_routed_map(i: int) -> dict[str, Any]:
    uid = str(uuid.UUID(int=i * 7919))
    name = f"svc-{i:04d}"
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": "Ready",
            "message": f"{kind} is fine for {name}",
            "observedGeneration": 1,
            "lastTransitionTime": f"2026-12-01T04:{i % 60:02d}:00Z",
        }
        for kind in ("Routable", "OverrideActive", "CapacityFallback", "Published")
    ]
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"namespace": f"bench-{i % 10}", "name": name, "uid": uid},
        "spec": {
            "service": name,
            "entries": [
                {
                    "cluster": cluster,
                    "endpoint": f"http://127.0.0.1:8080/bench-{i % 10}/{name}/{cluster}",
                    "weight": i % 5,
                    "capacity": {"reported": {"servable": i % 4}},
                }
                for cluster in ("worker-a", "worker-b", "worker-c")
            ],
        },
        "status": {"sourceUID": uid, "conditions": conditions},
    }


def packed_bytes(store: PackedStore) -> int:
    """The bytes the store's objects take packed (without the dictionary)."""
    return sum(len(packed) for packed in store._packed.values())


def test_maps_of_one_kind_are_held_in_under_a_third_of_their_marshal_bytes() -> None:
    store = PackedStore()
    maps = {("ns", f"svc-{i}"): a_routed_map(i) for i in range(200)}
    for key, tmap in maps.items():
        store[key] = tmap
    assert packed_bytes(store) * 3 < sum(len(marshal.dumps(m)) for m in maps.values())
    del store[("ns", "svc-0")]  # the first object held: the others still read back
    store[("ns", "svc-0")] = a_routed_map(1000)
    assert store[("ns", "svc-0")] == a_routed_map(1000)
    assert all(store[key] == tmap for key, tmap in maps.items() if key != ("ns", "svc-0"))
