"""The journal and the publisher, sharded: each write goes out under its key's shard tenure.

The same loopback API server and shard stand-in as `test_sharded_controller`; every
client is fenced by `ShardGate`, which refuses a write with no live tenure in its context.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml

from ome_routing.core.config import config_from_values
from ome_routing.core.journal import Cause, Change, Reason
from ome_routing.core.publication_status import FINALIZER
from ome_routing.kube.journal import Journal
from ome_routing.kube.leader import ElectionSettings
from ome_routing.kube.publisher import Publisher
from ome_routing.kube.sharding import ShardLease, writing_for
from ome_routing.metrics import RoutingMetrics

from .conftest import Handler, Reporter
from .sharded_world import FakeApi, FakeShards, fenced_client

pytestmark = pytest.mark.timeout(60)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMESPACE = "team"


def a_tenure(shard: int) -> ShardLease:
    return ShardLease(shard, ElectionSettings(), 0.0, clock=lambda: 0.0)


def a_map(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"namespace": NAMESPACE, "name": name, "uid": f"uid-{name}", **meta},
        "spec": {"service": name},
    }


CHANGE = Change("worker-a", 2, 1, (Reason(Cause.READY_CHANGED, "ready 2 -> 1"),))


@pytest.fixture
async def api(
    reporter: Callable[[Handler], Awaitable[Reporter]],
) -> AsyncIterator[tuple[FakeApi, str]]:
    world = FakeApi()
    server = await reporter(world.handle)
    yield world, server.base


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Awaitable[None]], None]]:
    tasks: list[asyncio.Task[None]] = []

    def start(work: Awaitable[None]) -> None:
        tasks.append(asyncio.ensure_future(work))

    yield start
    for task in tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_journal_event_is_sent_under_the_tenure_it_was_recorded_in(
    api: tuple[FakeApi, str],
    running: Callable[[Awaitable[None]], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One recorded under a tenure that ended before it was sent is dropped (a debug line,
    not an error); the next, under a live tenure, goes out through the shard's gate."""
    world, base = api
    client = fenced_client(base)
    caplog.set_level(logging.DEBUG, logger="ome_routing.journal")
    try:
        journal = Journal(client, lambda: datetime.now(UTC), instance="test")
        ended, live = a_tenure(0), a_tenure(1)
        now = datetime.now(UTC)
        with writing_for(ended):
            journal.record(a_map("handed-over"), [CHANGE], now)
        ended.end("handed over")
        with writing_for(live):
            journal.record(a_map("held"), [CHANGE], now)
        running(journal.run())
        await world.until(lambda: any(w.plural == "events" for w in world.writes))
        assert [w.body["regarding"]["name"] for w in world.writes] == ["held"]
        messages = [r.getMessage() for r in caplog.records]
        assert "journal event dropped: its shard is no longer held" in messages
        assert "journal event not written" not in messages
    finally:
        await client.close()


async def test_the_publisher_finalizes_only_the_maps_whose_shard_it_holds(
    api: tuple[FakeApi, str], running: Callable[[Awaitable[None]], None]
) -> None:
    """Two maps being deleted, one in a held shard: only that one is finalized (its writes
    pass the shard's gate); the other's shard, once acquired, is finalized too."""
    world, base = api
    shards = FakeShards(4)
    names: dict[int, str] = {}
    for n in range(100):
        names.setdefault(shards.shard((NAMESPACE, f"map-{n}")), f"map-{n}")
    held, other = names[0], names[1]
    for name in (held, other):
        world.put(
            "trafficmaps",
            a_map(name, finalizers=[FINALIZER], deletionTimestamp="2026-12-03T10:00:00Z"),
        )
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    values["ome"]["multicluster"]["config"]["routing"]["enabled"] = False  # finalizing only
    client = fenced_client(base)
    try:
        publisher = Publisher(client, config_from_values(values), RoutingMetrics(), shards=shards)

        def finalized(name: str) -> bool:
            tmap = world.get("trafficmaps", NAMESPACE, name)
            return tmap is not None and FINALIZER not in (tmap["metadata"].get("finalizers") or [])

        shards.acquire(0)
        running(publisher.run())
        await world.until(lambda: finalized(held))
        assert world.writes_of(NAMESPACE, other) == []

        shards.acquire(1)
        await world.until(lambda: finalized(other))
    finally:
        await client.close()


async def drained(publisher: Publisher) -> set[tuple[str, str]]:
    """The keys waiting in the publisher's work queue, taken off it."""
    queue = cast(Any, publisher)._queue
    keys = set()
    while len(queue):
        key = await queue.get()
        queue.done(key)
        keys.add(key)
    return keys


@pytest.mark.parametrize("sharded", [True, False])
async def test_a_resync_queues_the_maps_of_the_shards_held_or_every_map_unsharded(
    api: tuple[FakeApi, str], sharded: bool
) -> None:
    """A sharded replica's resync reads and repairs the maps of the shards it holds, not
    every map in its cache: the others are their holders' to resync. A single leader's
    resync queues every map."""
    _, base = api
    shards = FakeShards(4)
    keys = {(NAMESPACE, f"map-{n}") for n in range(40)}
    held = {key for key in keys if shards.shard(key) in (0, 2)}
    assert held and held != keys
    values = yaml.safe_load((EXAMPLES / "values.yaml").read_text())
    client = fenced_client(base)
    try:
        publisher = Publisher(
            client,
            config_from_values(values),
            RoutingMetrics(),
            shards=shards if sharded else None,
        )
        cast(Any, publisher)._maps = SimpleNamespace(cache={key: {} for key in keys})
        shards.acquire(0)
        shards.acquire(2)
        await asyncio.sleep(0)  # the shards' keys handed over (sharded), then taken off
        await drained(publisher)

        cast(Any, publisher)._resync_now()

        assert await drained(publisher) == (held if sharded else keys)
    finally:
        await client.close()
