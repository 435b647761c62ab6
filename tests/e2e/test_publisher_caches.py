"""The publisher's reads served from its watches (`kube.published`), on a real API server.

Once its caches have listed, a publication and a change of its weights make no read of
the API server; the ownership and hostname checks still see what other writers did, once
their watch events arrive; and a write computed from a cache that is behind (another
writer changed the route since) is refused by its resourceVersion and retried, never
applied on top of the other write.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType
from publisher_harness import gateway_api

from ome_routing.core.endpoint import EndpointConfig, parse_host_template
from ome_routing.core.publication import Publication, Source, plan_publication
from ome_routing.core.publication_status import Reason
from ome_routing.kube.publish_checks import PublishError
from ome_routing.kube.published import HTTPRoute, PublishedObjects
from ome_routing.kube.publishing import Publishing

__all__ = ["gateway_api"]  # fixtures

pytestmark = pytest.mark.timeout(120)

CONFIG = EndpointConfig(
    global_gateway="gateway-system/global",
    backend_port=80,
    host_template=parse_host_template("{{ .Name }}.{{ .Namespace }}.global.example.com"),
)


def plan(namespace: str, weights: dict[str, int]) -> Publication:
    entries = [
        {"cluster": c, "endpoint": f"http://chat.{namespace}.{c}.example.com/", "weight": w}
        for c, w in weights.items()
    ]
    spec = {"service": "chat", "entries": entries}
    return plan_publication(Source(namespace, "chat", {}), namespace, "chat", spec, CONFIG)


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def weights(route: dict[str, Any]) -> list[int]:
    return [ref["weight"] for ref in route["spec"]["rules"][0]["backendRefs"]]


@pytest.fixture
async def objects(gateway_api: Any, kube_client: AsyncClient) -> AsyncIterator[PublishedObjects]:
    cached = PublishedObjects(kube_client, CONFIG)
    task = asyncio.create_task(cached.run())

    async def listed() -> bool:
        return cached.listed()

    await until(listed)
    yield cached
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def publish(io: Publishing, planned: Publication, namespace: str) -> None:
    seen = await io.preflight(planned, (namespace, "chat"))
    await io.apply(planned, (namespace, "chat"), seen)


async def test_a_publication_and_a_weight_change_read_nothing_from_the_api_server(
    objects: PublishedObjects, kube_client: AsyncClient, namespace: str
) -> None:
    io = Publishing(kube_client, CONFIG, objects)
    await publish(io, plan(namespace, {"worker-a": 2, "worker-b": 1}), namespace)
    route = await kube_client.get(HTTPRoute, "chat-global", namespace=namespace)
    assert weights(dict(route)) == [2, 1]
    await publish(io, plan(namespace, {"worker-a": 1, "worker-b": 3}), namespace)
    route = await kube_client.get(HTTPRoute, "chat-global", namespace=namespace)
    assert weights(dict(route)) == [1, 3]
    assert io.reads == 0
    assert io.writes == 4  # two Services and the route, then the route again

    # the same without caches: the preflight reads the route, every route, both Services
    # (the pruning's lists come on top)
    live = Publishing(kube_client, CONFIG)
    await publish(live, plan(namespace, {"worker-a": 1, "worker-b": 1}), namespace)
    assert live.reads >= 4 and live.writes == 1


async def test_a_route_changed_by_another_writer_is_not_overwritten_from_a_stale_cache(
    gateway_api: Any, kube_client: AsyncClient, namespace: str
) -> None:
    cached = PublishedObjects(kube_client, CONFIG)
    task = asyncio.create_task(cached.run())

    async def listed() -> bool:
        return cached.listed()

    await until(listed)
    io = Publishing(kube_client, CONFIG, cached)
    await publish(io, plan(namespace, {"worker-a": 1, "worker-b": 1}), namespace)
    task.cancel()  # the caches stop here: whatever happens next, they are behind
    with contextlib.suppress(asyncio.CancelledError):
        await task

    other = {"metadata": {"annotations": {"edited-by": "someone-else"}}}
    await kube_client.patch(
        HTTPRoute, "chat-global", other, namespace=namespace, patch_type=PatchType.MERGE
    )
    with pytest.raises(PublishError) as raised:
        await publish(io, plan(namespace, {"worker-a": 5, "worker-b": 1}), namespace)
    assert raised.value.reason is Reason.APPLY_FAILED and not raised.value.terminal
    assert str(raised.value).startswith(f"update global HTTPRoute {namespace}/chat-global: ")
    route = dict(await kube_client.get(HTTPRoute, "chat-global", namespace=namespace))
    assert weights(route) == [1, 1]  # the stale write was refused whole
    assert route["metadata"]["annotations"]["edited-by"] == "someone-else"

    task = asyncio.create_task(cached.run())  # watching again: the retry sees the change

    async def caught_up() -> bool:
        held = cached.get(HTTPRoute, namespace, "chat-global") or {}
        return "edited-by" in (held.get("metadata") or {}).get("annotations", {})

    try:
        await until(caught_up)
        await publish(io, plan(namespace, {"worker-a": 5, "worker-b": 1}), namespace)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    route = dict(await kube_client.get(HTTPRoute, "chat-global", namespace=namespace))
    assert weights(route) == [5, 1]
    assert io.reads == 0


async def test_the_hostname_check_sees_another_route_through_the_watch(
    objects: PublishedObjects, kube_client: AsyncClient, namespace: str
) -> None:
    io = Publishing(kube_client, CONFIG, objects)
    planned = plan(namespace, {"worker-a": 1})
    other = HTTPRoute.from_dict(
        {
            "metadata": ObjectMeta(name="squatter", namespace=namespace).to_dict(),
            "spec": {
                "hostnames": [planned.host],
                "parentRefs": [{"name": "global", "namespace": "gateway-system"}],
            },
        }
    )
    await kube_client.create(other)

    async def seen() -> bool:
        return objects.get(HTTPRoute, namespace, "squatter") is not None

    await until(seen)
    with pytest.raises(PublishError) as raised:
        await publish(io, planned, namespace)
    assert raised.value.reason is Reason.CLAIM_REJECTED and raised.value.terminal
    assert f"is already published by HTTPRoute {namespace}/squatter" in str(raised.value)
    assert io.reads == 0
