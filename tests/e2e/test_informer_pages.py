"""An informer lists a page at a time, against the real API server.

The list is read `limit` objects a page, following `continue`, so a relist never holds
every object decoded at once; what it caches is every object all the same, and its
watch starts from the list's snapshot, so nothing created after the last page is missed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx2
from lightkube import AsyncClient

from ome_routing.kube import lightkube_adapter
from ome_routing.kube.resources import InferenceService
from ome_routing.kube.watching import Informer, ObjectKey, RawObject

SERVICES = 7
PAGE = 3


def a_service(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"model": {"name": name}, "routing": {}},
    }


async def test_an_informer_lists_a_page_at_a_time_and_caches_every_object(
    kube_client: AsyncClient, namespace: str
) -> None:
    names = [f"svc-{i}" for i in range(SERVICES)]
    for name in names:
        await kube_client.create(InferenceService.from_dict(a_service(namespace, name)))
    lists: list[httpx2.URL] = []

    async def record(
        request: httpx2.Request, stream: bool, send: lightkube_adapter.Send
    ) -> httpx2.Response:
        if request.url.path.endswith("/inferenceservices") and "watch" not in request.url.params:
            lists.append(request.url)
        return await send(request, stream)

    # the informer's every request, seen as the controller's write gate sees them
    lightkube_adapter.filter_sends(kube_client, record)
    heard: list[ObjectKey] = []

    def on_event(key: ObjectKey, old: RawObject | None, new: RawObject | None) -> None:
        heard.append(key)

    informer = Informer(
        kube_client, InferenceService, on_event, namespaced=True, packed=True, page=PAGE
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        assert {(namespace, name) for name in names} <= set(informer.cache)
        assert {(namespace, name) for name in names} <= set(heard)
        # other tests' services may be listed too: at least three pages for seven
        assert len(lists) >= -(-SERVICES // PAGE)
        assert all(url.params.get("limit") == str(PAGE) for url in lists)
        assert all("continue" in url.params for url in lists[1:])

        await kube_client.create(InferenceService.from_dict(a_service(namespace, "late")))
        async with asyncio.timeout(30):
            while (namespace, "late") not in informer.cache:
                await asyncio.sleep(0.05)
        assert (namespace, "late") in heard
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
