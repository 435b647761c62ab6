"""The kinds the publisher writes, and the caches it reads them from while it leads.

OME's publisher reads HTTPRoutes and Services through controller-runtime's cached
client: an informer per kind, watched across the cluster (its manager's ClusterRole grants
`watch` on both). `PublishedObjects` does the same here: one `Informer` per kind the
publisher's mode writes (HTTPRoutes, Services and BackendTLSPolicies always;
EndpointSlices in the EndpointSlice modes). The preflight's ownership and
hostname checks then cost no round trip, and a TrafficMap's new weights wait only on the
route's own write.

A cache may be behind the API server. That never makes a write wrong, only a retry: every
write is fenced by the version it was computed from (`kube.publishing`), so a write on a
stale read gets 409 and the publication is retried on a newer one. So that the
publisher's own writes are not such a stale read for the next reconcile, each write and
delete is put into the cache at once (`remember`, `forget`), as the TrafficMap cache does.

A kind whose cache has not listed yet (the controller just started leading, or the kind
is not served: no Gateway API CRDs) is read from the API server, as before.
"""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from lightkube.generic_resource import create_namespaced_resource

from ome_routing.core.endpoint import EndpointConfig
from ome_routing.core.publication_objects import GATEWAY_GROUP
from ome_routing.kube.tasks import run_together
from ome_routing.kube.watching import WATCH_TIMING, Informer, RawObject, WatchTiming, lean

HTTPRoute = create_namespaced_resource(GATEWAY_GROUP, "v1", "HTTPRoute", "httproutes")
BackendTLSPolicy = create_namespaced_resource(
    GATEWAY_GROUP, "v1", "BackendTLSPolicy", "backendtlspolicies"
)
Service = create_namespaced_resource("", "v1", "Service", "services")
EndpointSlice = create_namespaced_resource(
    "discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"
)


def cached_kinds(config: EndpointConfig) -> tuple[Any, ...]:
    """The kinds the publisher reads in this mode (and so must be allowed to watch).

    BackendTLSPolicies always: a publication prunes the stale ones of its service even
    with `tls` off (it may have been on before)."""
    kinds: list[Any] = [HTTPRoute, Service, BackendTLSPolicy]
    if config.hostname_endpoint_slices or config.endpoint_slices_enabled:
        kinds.append(EndpointSlice)
    return tuple(kinds)


class PublishedObjects:
    """One informer per kind the publisher reads; see the module's docstring."""

    def __init__(
        self,
        client: AsyncClient,
        config: EndpointConfig,
        *,
        timing: WatchTiming = WATCH_TIMING,
    ) -> None:
        # `lean` only: these caches are read whole (a route's spec, a Service's labels)
        self._informers = {
            resource: Informer(
                client,
                resource,
                None,
                namespaced=True,
                transform=lean,
                timing=timing,
            )
            for resource in cached_kinds(config)
        }

    @property
    def informers(self) -> tuple[Informer, ...]:
        return tuple(self._informers.values())

    async def run(self) -> None:
        """Keep every cache in step until cancelled (an unserved kind keeps retrying)."""
        await run_together(
            {f"watch-{informer.kind}": informer.run() for informer in self._informers.values()}
        )

    def holds(self, resource: Any) -> bool:
        """Whether reads of `resource` may come from its cache (it has listed)."""
        informer = self._informers.get(resource)
        return informer is not None and informer.synced.is_set()

    def listed(self) -> bool:
        """Whether every kind's cache has listed (an unserved kind never does)."""
        return all(informer.synced.is_set() for informer in self._informers.values())

    def get(self, resource: Any, namespace: str, name: str) -> RawObject | None:
        return self._informers[resource].cache.get((namespace, name))

    def items(self, resource: Any) -> list[RawObject]:
        return list(self._informers[resource].cache.values())

    def remember(self, resource: Any, raw: RawObject) -> None:
        """An object this process just wrote, ahead of its watch event."""
        informer = self._informers.get(resource)
        if informer is not None:
            informer.remember(raw)

    def forget(self, resource: Any, raw: RawObject) -> None:
        """An object this process just deleted (that version only), ahead of its event."""
        informer = self._informers.get(resource)
        meta = raw.get("metadata") or {}
        if informer is not None:
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            informer.forget(key, str(meta.get("resourceVersion") or ""))
