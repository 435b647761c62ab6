"""The routing controller, sharded: it works on the keys whose shard it holds, and only those.

A loopback API server (`sharded_world.FakeApi`) holds the InferenceServices and takes the
maps; a loopback reporter answers the polls of every home; the controller writes through
a `FencedClient` whose gate is `ShardGate`, so a write with no live tenure in its context
never leaves the process. The shard owner is a stand-in that hands out real tenures.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from ome_routing.core.config import config_from_values
from ome_routing.kube.controller import Controller
from ome_routing.metrics import RoutingMetrics

from .conftest import Handler, Reporter, a_report
from .sharded_world import FakeApi, FakeShards, Write, fenced_client

pytestmark = pytest.mark.timeout(60)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMESPACE = "team"
SHARDS = 4
Key = tuple[str, str]


def services_in(shards: FakeShards, wanted: list[int], each: int = 2) -> dict[int, list[Key]]:
    """`each` service keys in each of the `wanted` shards."""
    found: dict[int, list[Key]] = {shard: [] for shard in wanted}
    for n in range(1000):
        key = (NAMESPACE, f"svc-{n}")
        shard = shards.shard(key)
        if shard in found and len(found[shard]) < each:
            found[shard].append(key)
        if all(len(keys) == each for keys in found.values()):
            return found
    raise AssertionError("no keys for every shard")


def an_isvc(key: Key, reporter: str, ready: int = 2) -> dict[str, Any]:
    isvc: dict[str, Any] = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
    isvc["metadata"] = {"namespace": key[0], "name": key[1]}
    isvc["status"] = {
        "placement": {
            "phase": "Placed",
            "candidates": [
                {
                    "cluster": cluster,
                    "phase": "Admitted",
                    "endpoint": f"{reporter}/{key[1]}/{cluster}",
                    "admittedReplicas": 2,
                    "readyReplicas": ready,
                }
                for cluster in ("worker-a", "worker-b")
            ],
        }
    }
    return isvc


class World:
    def __init__(self, api: FakeApi, polled: list[str], shards: FakeShards, base: str) -> None:
        self.api = api
        self.reporter = base
        self.polled = polled
        self.shards = shards
        self.controller: Controller | None = None

    def map_written(self, key: Key) -> bool:
        """The map exists and carries the routing controller's status."""
        tmap = self.api.get("trafficmaps", *key)
        return tmap is not None and bool((tmap.get("status") or {}).get("conditions"))

    def change(self, key: Key, ready: int) -> None:
        """A new placement status for the service: its homes' ready replicas."""
        isvc = copy.deepcopy(self.api.get("inferenceservices", *key))
        assert isvc is not None
        for candidate in isvc["status"]["placement"]["candidates"]:
            candidate["readyReplicas"] = ready
        self.api.put("inferenceservices", isvc)

    def spec_patched_since(self, seen: int, key: Key) -> bool:
        return any(
            (x.namespace, x.name) == key and x.method == "PATCH" and not x.subresource
            for x in self.api.writes[seen:]
        )

    def settled(self, keys: list[Key]) -> bool:
        """Every map written after its homes' first polls, and nothing queued or underway
        (the next polls are a period, 10s, away)."""
        assert self.controller is not None
        queue = self.controller._queue
        return (
            all(self.map_written(k) and len(self.polls_of(k)) >= 2 for k in keys)
            and not queue._queued
            and not queue._active
            and not queue._ready.qsize()
        )

    def polls_of(self, key: Key) -> list[str]:
        return [path for path in self.polled if path.startswith(f"/{key[1]}/")]

    def homes_of(self, key: Key) -> list[Any]:
        assert self.controller is not None and self.controller._observer is not None
        held = self.controller._observer.keys()  # the observer's own list of its homes
        return [h for h in held if (h.namespace, h.name) == key]


@pytest.fixture
async def world(
    reporter: Callable[[Handler], Awaitable[Reporter]],
) -> AsyncIterator[Callable[[list[Key]], Awaitable[World]]]:
    """Start the API server, the reporter, and a sharded controller over `keys`."""
    tasks: list[asyncio.Task[None]] = []
    clients: list[Any] = []

    async def start(keys: list[Key]) -> World:
        api = FakeApi()
        api_server = await reporter(api.handle)
        polled: list[str] = []

        async def report(request: web.Request) -> web.StreamResponse:
            polled.append(request.path)
            api._changed.set()
            return web.json_response(a_report(observed_at=datetime.now(UTC)))

        capacity = await reporter(report)
        for key in keys:
            api.put("inferenceservices", an_isvc(key, capacity.base))
        shards = FakeShards(SHARDS)
        built = World(api, polled, shards, capacity.base)
        client = fenced_client(api_server.base)
        clients.append(client)
        config = config_from_values(yaml.safe_load((EXAMPLES / "values.yaml").read_text()))
        built.controller = Controller(client, config, RoutingMetrics(), shards=shards)
        tasks.append(asyncio.create_task(built.controller.run()))
        await built.controller.synced.wait()
        # the watches are open: what the test changes from now on reaches the caches
        await api.until(lambda: {"inferenceservices", "trafficmaps"} <= set(api.watchers))
        return built

    yield start
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for client in clients:
        await client.close()


async def test_a_key_whose_shard_is_not_held_is_neither_polled_nor_written(
    world: Callable[[list[Key]], Awaitable[World]],
) -> None:
    """And its shard, once acquired, brings its keys into the queue at once."""
    split = services_in(FakeShards(SHARDS), [0, 1])
    held, other = split[0], split[1]
    w = await world([*held, *other])
    w.shards.acquire(0)
    await w.api.until(lambda: all(w.map_written(k) and len(w.polls_of(k)) >= 2 for k in held))
    for key in other:
        assert w.api.writes_of(*key) == []
        assert w.polls_of(key) == []
        assert w.homes_of(key) == []
    assert all(len(w.homes_of(key)) == 2 for key in held)

    w.shards.acquire(1)  # no event comes for its services: the acquisition enqueues them
    await w.api.until(lambda: all(w.map_written(k) and len(w.polls_of(k)) >= 2 for k in other))


async def test_a_shard_handed_over_lets_its_homes_go_and_writes_nothing_more(
    world: Callable[[list[Key]], Awaitable[World]],
) -> None:
    split = services_in(FakeShards(SHARDS), [0, 1])
    leaving, staying = split[0], split[1]
    w = await world([*leaving, *staying])
    w.shards.acquire(0)
    w.shards.acquire(1)
    await w.api.until(lambda: w.settled([*leaving, *staying]))

    await w.shards.hand_over(0)
    for key in leaving:
        assert w.homes_of(key) == []
    seen = len(w.api.writes)
    # a change to every service: only the staying ones are reconciled
    for key in [*leaving, *staying]:
        w.change(key, ready=1)
    await w.api.until(lambda: all(w.spec_patched_since(seen, k) for k in staying))
    for key in leaving:
        assert [x for x in w.api.writes[seen:] if (x.namespace, x.name) == key] == []
        assert w.homes_of(key) == []


async def test_a_handover_waits_for_the_reconcile_underway_to_finish_its_writes(
    world: Callable[[list[Key]], Awaitable[World]],
) -> None:
    keys = services_in(FakeShards(SHARDS), [0], each=1)[0]
    w = await world(keys)
    w.shards.acquire(0)
    await w.api.until(lambda: w.map_written(keys[0]))

    held, release, order = asyncio.Event(), asyncio.Event(), []

    async def hold_the_spec(write: Write) -> None:
        if write.method == "PATCH" and write.subresource == "":
            held.set()
            await release.wait()
            order.append("spec written")

    w.api.hold = hold_the_spec
    w.change(keys[0], ready=1)
    await held.wait()  # the reconcile is in flight, its spec write on the wire

    async def hand_over() -> None:
        await w.shards.hand_over(0)
        order.append("handed over")

    handing = asyncio.create_task(hand_over())
    release.set()
    await handing
    assert order == ["spec written", "handed over"]
    # the gate was open for the reconcile's writes: its status followed its spec
    status_writes = [
        x for x in w.api.writes_of(*keys[0]) if x.subresource == "status" and x.method == "PATCH"
    ]
    assert len(status_writes) == 2
    assert w.homes_of(keys[0]) == []


async def test_a_lost_shard_refuses_the_rest_of_the_reconcile_and_drops_the_key_quietly(
    world: Callable[[list[Key]], Awaitable[World]], caplog: pytest.LogCaptureFixture
) -> None:
    """Lost (the gate shut first): the status after the spec is refused at the gate, and
    the refusal is no `Reconciler error`."""
    keys = services_in(FakeShards(SHARDS), [0], each=1)[0]
    w = await world(keys)
    w.shards.acquire(0)
    await w.api.until(lambda: w.map_written(keys[0]))

    held, release = asyncio.Event(), asyncio.Event()

    async def hold_the_spec(write: Write) -> None:
        if write.method == "PATCH" and write.subresource == "":
            held.set()
            await release.wait()

    w.api.hold = hold_the_spec
    statuses = len([x for x in w.api.writes_of(*keys[0]) if x.subresource == "status"])
    caplog.set_level(logging.DEBUG)
    w.change(keys[0], ready=1)
    await held.wait()
    losing = asyncio.create_task(w.shards.lose(0))
    release.set()
    await losing

    assert len([x for x in w.api.writes_of(*keys[0]) if x.subresource == "status"]) == statuses
    assert w.homes_of(keys[0]) == []
    assert [r for r in caplog.records if r.getMessage() == "Reconciler error"] == []
    assert any(r.getMessage() == "shard no longer held: key dropped" for r in caplog.records)


async def test_an_acquired_shards_homes_are_polled_before_a_worker_reaches_its_keys(
    world: Callable[[list[Key]], Awaitable[World]],
) -> None:
    """At an acquisition the homes of the shard's services are polled at once, not when a
    worker reaches each key (a takeover's ceilings come a period after it, not after the
    queue): here every worker is held in a write of another shard's services, and the new
    shard's homes are polled all the same. Lost before a worker reached its keys, a shard
    lets their homes go."""
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    workers = config_from_values(values).observer.max_concurrent_reconciles
    split = services_in(FakeShards(SHARDS), [0, 1, 2], each=workers)
    busy, arriving, leaving = split[0], split[1][:2], split[2][:2]
    w = await world([*busy, *arriving, *leaving])
    held: list[Write] = []
    release = asyncio.Event()

    async def hold_the_busy(write: Write) -> None:
        if (write.namespace, write.name) in busy:
            held.append(write)
            await release.wait()

    w.api.hold = hold_the_busy
    try:
        w.shards.acquire(0)
        await w.api.until(lambda: len(held) == workers)  # every worker in a write

        w.shards.acquire(1)
        await w.api.until(lambda: all(len(w.polls_of(k)) >= 2 for k in arriving))
        # polled while every worker was still in its write (a write's deadline frees them)
        assert w.controller is not None and w.controller._queue._active == set(busy)
        for key in arriving:
            assert w.api.writes_of(*key) == []
            assert len(w.homes_of(key)) == 2

        w.shards.acquire(2)
        await w.api.until(lambda: all(len(w.homes_of(k)) == 2 for k in leaving))
        await w.shards.lose(2)
        for key in leaving:
            assert w.homes_of(key) == []
    finally:
        release.set()
    await w.api.until(lambda: all(w.map_written(k) for k in [*busy, *arriving]))
    for key in leaving:
        assert w.api.writes_of(*key) == []
        assert w.homes_of(key) == []
