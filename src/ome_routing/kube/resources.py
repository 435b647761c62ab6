"""The custom resources routing reads and writes, as lightkube generic resources, and
the one write lightkube has no call for: a delete with preconditions (`fenced_delete`),
which the routing controller and the publisher both send."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from ome_routing.kube import lightkube_adapter

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


async def fenced_delete(
    client: AsyncClient,
    resource: Any,
    namespace: str,
    name: str,
    *,
    uid: str,
    resource_version: str,
) -> None:
    """DELETE with `preconditions` (lightkube's `delete` sends no DeleteOptions body, and
    preconditions travel only there), built with lightkube's own request builder.

    Raises `ApiError` as `AsyncClient.delete` does: 404 when the object is gone, 409 when
    its UID or resourceVersion is no longer the one given.
    """
    preconditions = {"uid": uid, "resourceVersion": resource_version}
    options = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {k: v for k, v in preconditions.items() if v},
    }
    await lightkube_adapter.send_request(
        client, "delete", resource, name=name, namespace=namespace, data=options
    )
