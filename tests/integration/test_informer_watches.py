"""An informer's watches on a real HTTP server: randomized server timeouts, bookmarks, and a
silent watch that ends and lists again; `dead` once listing fails too.

The server on loopback answers the list and watch requests of one resource as
kube-apiserver does (a list, then newline-delimited watch events); each test scripts
what a watch request gets. The control plane's own behaviour is in tests/chaos.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from lightkube import AsyncClient, KubeConfig

from ome_routing.kube.health import Health, answer
from ome_routing.kube.resources import TrafficMap
from ome_routing.kube.watching import Informer, WatchTiming

pytestmark = pytest.mark.timeout(60)

WATCHES = "/apis/ome.io/v1beta1/trafficmaps"
STOP = web.AppKey("stop", asyncio.Event)
Script = Callable[[web.Request, web.StreamResponse], Awaitable[None]]


def a_map(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"namespace": "ns", "name": name, "resourceVersion": version},
        "spec": {"service": name},
    }


class FakeApi:
    """Lists `objects` at `version`; each watch request runs the next of `scripts`."""

    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = [a_map("svc", "5")]
        self.version = "10"
        self.lists = 0
        self.list_fails = False
        self.watches: list[dict[str, str]] = []
        self.scripts: list[Script] = []
        self.listed = asyncio.Event()
        self.watched = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            self.lists += 1
            self.listed.set()
            if self.list_fails:
                return web.json_response(
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                     "message": "etcdserver: request timed out", "code": 500},
                    status=500,
                )  # fmt: skip
            return web.json_response(
                {"kind": "TrafficMapList", "apiVersion": "ome.io/v1beta1",
                 "metadata": {"resourceVersion": self.version}, "items": self.objects}
            )  # fmt: skip
        self.watches.append(dict(request.query))
        self.watched.set()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        script = self.scripts.pop(0) if self.scripts else hold
        await script(request, response)
        return response


async def send(response: web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
    await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")


def bookmark(version: str) -> dict[str, Any]:
    return {"apiVersion": "ome.io/v1beta1", "kind": "TrafficMap",
            "metadata": {"resourceVersion": version}}  # fmt: skip


async def hold(request: web.Request, response: web.StreamResponse) -> None:
    """The connection stays open and says nothing: a half-open watch, as the client sees it
    (until the test ends)."""
    await request.app[STOP].wait()


@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeApi, AsyncClient]]:
    fake = FakeApi()
    app = web.Application()
    app[STOP] = asyncio.Event()
    app.router.add_get(WATCHES, fake.handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = KubeConfig.from_dict(
        {
            "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "fake", "user": {"token": "t"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
    )
    client = AsyncClient(config=config, trust_env=False)
    try:
        yield fake, client
    finally:
        app[STOP].set()
        await client.close()
        await runner.cleanup()


async def until(check: Callable[[], bool]) -> None:
    while not check():
        await asyncio.sleep(0.01)


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Informer], None]]:
    tasks: list[asyncio.Task[None]] = []
    yield lambda informer: tasks.append(asyncio.create_task(informer.run()))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_each_watch_asks_for_bookmarks_and_to_be_ended_after_5_to_10_minutes(
    api: tuple[FakeApi, AsyncClient], running: Callable[[Informer], None]
) -> None:
    fake, client = api

    async def end(request: web.Request, response: web.StreamResponse) -> None:
        pass  # the server's timeoutSeconds passed

    fake.scripts = [end] * 20
    informer = Informer(client, TrafficMap, None, namespaced=True, rng=random.Random(7))
    running(informer)
    await until(lambda: len(fake.watches) >= 20)
    timeouts = [int(w["timeoutSeconds"]) for w in fake.watches]
    assert all(300 <= t <= 600 for t in timeouts), timeouts
    assert len(set(timeouts)) > 10, f"each request draws its own: {timeouts}"
    assert {w["allowWatchBookmarks"] for w in fake.watches} == {"true"}
    assert fake.lists == 1, "a watch the server ends is resumed, not listed again"


async def test_a_bookmark_moves_the_version_the_next_watch_resumes_from(
    api: tuple[FakeApi, AsyncClient], running: Callable[[Informer], None]
) -> None:
    fake, client = api

    async def bookmark_then_end(request: web.Request, response: web.StreamResponse) -> None:
        await send(response, "BOOKMARK", bookmark("42"))

    fake.scripts = [bookmark_then_end]
    heard: list[Any] = []
    informer = Informer(client, TrafficMap, lambda *event: heard.append(event), namespaced=True)
    running(informer)
    await until(lambda: len(fake.watches) >= 2)
    assert [w["resourceVersion"] for w in fake.watches] == ["10", "42"]
    assert len(heard) == 1, "the list's one event; a bookmark is no event"
    assert list(informer.cache) == [("ns", "svc")]


async def test_a_watch_silent_past_its_bound_ends_and_the_informer_lists_again(
    api: tuple[FakeApi, AsyncClient], running: Callable[[Informer], None]
) -> None:
    """The change made while the watch said nothing reaches the cache through the new list."""
    fake, client = api
    fake.scripts = [hold]
    timing = WatchTiming(idle_timeout=0.3)
    informer = Informer(client, TrafficMap, None, namespaced=True, timing=timing)
    running(informer)
    await informer.synced.wait()
    await fake.watched.wait()
    fake.objects = [a_map("svc", "5"), a_map("new", "11")]
    fake.version = "11"
    await until(lambda: ("ns", "new") in informer.cache)
    assert fake.lists >= 2
    await until(lambda: len(fake.watches) >= 2)  # the next watch, from the new list
    assert [w["resourceVersion"] for w in fake.watches][:2] == ["10", "11"]


async def test_a_dead_watch_whose_list_fails_is_dead_and_fails_healthz(
    api: tuple[FakeApi, AsyncClient], running: Callable[[Informer], None]
) -> None:
    fake, client = api
    fake.scripts = [hold]
    timing = WatchTiming(idle_timeout=0.3)
    informer = Informer(client, TrafficMap, None, namespaced=True, timing=timing)
    health = Health()
    health.watch(informer, needed=True)
    loop = asyncio.get_running_loop()
    running(informer)
    await informer.synced.wait()
    await fake.watched.wait()
    assert answer("healthz", health.liveness(loop.time())) == (200, "ok")
    fake.list_fails = True
    fake.listed.clear()
    await fake.listed.wait()  # the watch went silent; the list it was followed by fails
    await until(lambda: informer.dead(loop.time()))
    status, body = answer("healthz", health.liveness(loop.time()))
    assert (status, body) == (500, "[-]watches failed: reason withheld\nhealthz check failed\n")
    fake.list_fails = False
    await until(lambda: not informer.dead(loop.time()))
    assert answer("healthz", health.liveness(loop.time())) == (200, "ok")


async def test_a_quiet_watch_whose_list_fails_is_not_dead_within_its_bound(
    api: tuple[FakeApi, AsyncClient], running: Callable[[Informer], None]
) -> None:
    """Listing fails at once, but the API server answered less than the bound ago."""
    fake, client = api

    async def broken(request: web.Request, response: web.StreamResponse) -> None:
        raise ConnectionResetError  # the connection drops: the informer lists again

    fake.scripts = [broken]
    informer = Informer(client, TrafficMap, None, namespaced=True)  # bound: 150 s
    running(informer)
    await informer.synced.wait()
    fake.list_fails = True
    fake.listed.clear()
    await fake.listed.wait()
    await until(lambda: informer.list_failing)
    assert not informer.dead(asyncio.get_running_loop().time())
