"""The custom resources routing reads and writes, as lightkube generic resources, and
the one write lightkube has no call for: a delete with preconditions."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

GROUP = "ome.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

InferenceService = create_namespaced_resource(
    GROUP, VERSION, "InferenceService", "inferenceservices"
)
TrafficMap = create_namespaced_resource(GROUP, VERSION, "TrafficMap", "trafficmaps")
WorkloadCluster = create_global_resource(GROUP, VERSION, "WorkloadCluster", "workloadclusters")

#: The name of the field manager for every write the controller makes.
FIELD_MANAGER = "ome-routing"
#: OME's field owner of the routing controller's status apply (`sourceUID` and the
#: Routable, CapacityFallback and OverrideActive conditions).
ROUTING_STATUS_FIELD_OWNER = "ome-trafficmap-routing"


async def delete_with_preconditions(
    client: AsyncClient, resource: Any, key: tuple[str, str], *, uid: str, resource_version: str
) -> None:
    """Delete `key` only while it is still at `uid` and `resource_version` (else 409).

    lightkube's `delete` sends no body, and preconditions travel only in the body's
    DeleteOptions, so the request is built with lightkube's own request builder.
    """
    namespace, name = key
    if not uid or not resource_version:
        raise ValueError(f"delete {namespace}/{name}: a UID and a resourceVersion are required")
    inner = client._client
    request = inner.prepare_request("delete", res=resource, name=name, namespace=namespace)
    request.data = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": uid, "resourceVersion": resource_version},
    }
    response = await inner.send(inner.build_adapter_request(request))  # type: ignore[no-untyped-call]
    inner.handle_response("delete", response, request)
