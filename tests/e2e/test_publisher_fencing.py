"""The publisher's deletes are fenced by UID and resourceVersion, as OME fences them.

Against the local control plane's real API server: a delete names the version of the
object that was read, so an object that another writer changed or recreated between the
publisher's read and its delete survives, and the publication is retried (ApplyFailed,
not terminal) on a fresh read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from lightkube import ApiError, AsyncClient
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Service
from lightkube.types import PatchType

from ome_routing.core.endpoint import EndpointConfig
from ome_routing.core.publication import source_selector
from ome_routing.core.publication_status import Reason
from ome_routing.kube.publish_checks import PublishError
from ome_routing.kube.publishing import Publishing, fenced_delete

pytestmark = pytest.mark.timeout(120)

SOURCE = ("prod", "chat")


async def make_service(
    client: AsyncClient, namespace: str, name: str, labels: Mapping[str, str]
) -> Service:
    body = Service(
        metadata=ObjectMeta(name=name, namespace=namespace, labels=dict(labels)),
        spec=ServiceSpec(
            type="ExternalName", externalName="worker-a.example.com", ports=[ServicePort(port=80)]
        ),
    )
    return await client.create(body)


async def exists(client: AsyncClient, namespace: str, name: str) -> Service | None:
    try:
        return await client.get(Service, name, namespace=namespace)
    except ApiError as err:
        assert err.status.code == 404
        return None


def version(obj: Service) -> tuple[str, str]:
    assert obj.metadata is not None
    return str(obj.metadata.uid), str(obj.metadata.resourceVersion)


async def test_a_delete_with_the_version_read_removes_the_object(
    kube_client: AsyncClient, namespace: str
) -> None:
    created = await make_service(kube_client, namespace, "tmb-same", {})
    uid, rv = version(created)
    await fenced_delete(kube_client, Service, namespace, "tmb-same", uid=uid, resource_version=rv)
    assert await exists(kube_client, namespace, "tmb-same") is None


async def test_a_changed_object_is_not_deleted(kube_client: AsyncClient, namespace: str) -> None:
    created = await make_service(kube_client, namespace, "tmb-changed", {})
    uid, rv = version(created)
    created.metadata.labels = {"changed": "yes"}  # type: ignore[union-attr]
    await kube_client.replace(created)
    with pytest.raises(ApiError) as raised:
        await fenced_delete(
            kube_client, Service, namespace, "tmb-changed", uid=uid, resource_version=rv
        )
    assert raised.value.status.code == 409
    assert await exists(kube_client, namespace, "tmb-changed") is not None


async def test_a_recreated_object_is_not_deleted(kube_client: AsyncClient, namespace: str) -> None:
    first = await make_service(kube_client, namespace, "tmb-again", {})
    uid, _ = version(first)
    await kube_client.delete(Service, "tmb-again", namespace=namespace)
    second = await make_service(kube_client, namespace, "tmb-again", {})
    with pytest.raises(ApiError) as raised:
        await fenced_delete(
            kube_client, Service, namespace, "tmb-again", uid=uid, resource_version=""
        )
    assert raised.value.status.code == 409
    survivor = await exists(kube_client, namespace, "tmb-again")
    assert survivor is not None and version(survivor)[0] == version(second)[0] != uid


async def test_a_gone_object_is_a_404(kube_client: AsyncClient, namespace: str) -> None:
    with pytest.raises(ApiError) as raised:
        await fenced_delete(
            kube_client, Service, namespace, "tmb-none", uid="x", resource_version="1"
        )
    assert raised.value.status.code == 404


class RacedPublishing(Publishing):
    """Publishing whose LIST is followed, before any delete, by another writer's change."""

    def __init__(self, client: AsyncClient, change: Any) -> None:
        super().__init__(client, EndpointConfig(global_gateway="global", backend_port=80))
        self._change = change

    async def _list(
        self, resource: Any, namespace: str, labels: Mapping[str, str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        listed = [obj async for obj in super()._list(resource, namespace, labels)]
        await self._change()
        for obj in listed:
            yield obj


async def test_pruning_keeps_a_stale_service_that_changed_after_the_list_and_retries(
    kube_client: AsyncClient, namespace: str
) -> None:
    labels = source_selector(*SOURCE)
    await make_service(kube_client, namespace, "tmb-stale", labels)
    await make_service(kube_client, namespace, "tmb-untouched", labels)

    edits = iter(range(1000))

    async def relabel() -> None:  # after each LIST (of every kind pruned): a new version
        # a merge patch, not a read and replace: the LISTs of the kinds run at once, and
        # two replaces of the same read would conflict with each other
        patch = {"metadata": {"labels": {"edit": str(next(edits))}}}
        await kube_client.patch(
            Service, "tmb-stale", patch, namespace=namespace, patch_type=PatchType.MERGE
        )

    publishing = RacedPublishing(kube_client, relabel)
    with pytest.raises(PublishError) as raised:
        await publishing.delete_source_objects(namespace, SOURCE)
    assert raised.value.reason is Reason.APPLY_FAILED and not raised.value.terminal
    assert f"delete global backend Service {namespace}/tmb-stale" in str(raised.value)
    assert await exists(kube_client, namespace, "tmb-stale") is not None

    async def nothing() -> None:
        return None

    # the retry reads afresh and deletes both
    await RacedPublishing(kube_client, nothing).delete_source_objects(namespace, SOURCE)
    assert await exists(kube_client, namespace, "tmb-stale") is None
    assert await exists(kube_client, namespace, "tmb-untouched") is None
