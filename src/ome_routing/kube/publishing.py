"""The publisher's writes on the control plane: routes, backend Services, slices, policies.

(One module of about 450 lines, on purpose: `Publishing` is one object, the client, the
endpoint settings, the caches and the counters, whose steps in OME's order share them;
the pure checks are in `kube.publish_checks`, the caches in `kube.published`.)

`Publishing` carries out a `core.publication.Publication` in OME's order: ownership
preflight (nothing written yet), then Services, then EndpointSlices and
BackendTLSPolicies, then the route, then the pruning of stale slices, policies and
Services, so that the route never names a backend that is not there yet or any more.
A withdrawal sets the route's weights to zero, deletes it, confirms that it is gone,
and only then deletes the service's other objects. An object is written only when its
body differs from the one the API server holds. Reads come from the publisher's caches
of these kinds where it runs them (`kube.published`, as OME's cached client reads), else
from the API server; the confirmation that a withdrawn route is gone is always read from
the API server. The preflight's reads are made at once and checked in OME's order, and
`apply` compares with what they read rather than reading each object again (a write is
still fenced by the version read, so an object changed in between gives 409 and a retry);
the pruning lists its kinds at once too. A publication thus waits on no round trip before
the route's write when the caches have listed, and on one otherwise.

Every write is fenced by the version of the object it was computed from, so that a write
prepared by a replica that has since lost the Lease fails once the new leader has written
the object: a replacement (a changed object, a route's weights zeroed) carries the
resourceVersion that was read, a create fails with 409 `AlreadyExists` when the object
has appeared since the read, and a delete, as OME fences it, names the UID and
resourceVersion of the object that was read. An object recreated or changed in between
(another writer, a new owner, a new leader) is not touched: the API server answers 409
and the publication is retried on a fresh read. The writes go through the client given,
which with leader election is the elector's `FencedClient` (`kube.fencing`).

Ownership is OME's strict rule: an object belongs to a service only when it carries
all three publication labels naming it (`core.publication.owned_by`).

Errors (`PublishError`, with OME's reason and whether it is terminal):
- `ClaimRejected`, terminal: an object at one of our names belongs to another source,
  or the global host is already published on the Gateway by another route;
- `ClaimRejected`, retried: a read failed, or one of our objects is terminating;
- `DrainFailed`, retried: zeroing a stale claimed route failed;
- `ApplyFailed`, retried: a write failed (the API server's message is kept), or a
  withdrawn route's deletion is still pending.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient

from ome_routing.core.endpoint import EndpointConfig
from ome_routing.core.publication import (
    Backend,
    Publication,
    gateway_key,
    owned_by,
    source_selector,
)
from ome_routing.core.publication_objects import (
    endpoint_slice_body,
    endpoint_slice_name,
    route_body,
    service_body,
    tls_policy_body,
)
from ome_routing.core.publication_status import Reason
from ome_routing.kube import lightkube_adapter
from ome_routing.kube.publish_checks import (
    PublishError,
    api_message,
    as_raw,
    not_found,
    object_key,
    owned_or_absent,
    plural,
    publishes,
    selected,
    subset,
    zero_weights,
)
from ome_routing.kube.published import (
    BackendTLSPolicy,
    EndpointSlice,
    HTTPRoute,
    PublishedObjects,
    Service,
)
from ome_routing.kube.resources import fenced_delete as fenced_delete

#: The publisher's own field manager (OME's), apart from the routing controller's.
FIELD_MANAGER = "ome-trafficmap-publisher"
Raw = dict[str, Any]
SourceKey = tuple[str, str]
#: What a preflight read, by (resource, name) in the route's namespace: for `apply`.
Seen = dict[tuple[Any, str], Raw | None]


class Publishing:
    def __init__(
        self,
        client: AsyncClient,
        config: EndpointConfig,
        objects: PublishedObjects | None = None,
    ) -> None:
        self._kube = client
        self._config = config
        #: the publisher's caches of the kinds it writes (`kube.published`), when it runs them
        self._objects = objects
        self.writes = 0
        #: reads that went to the API server (the rest came from the caches)
        self.reads = 0

    # --- reads ------------------------------------------------------------------------

    async def _get(self, resource: Any, namespace: str, name: str) -> Raw | None:
        """The object, or None when it (or its whole kind: no CRD) is not there."""
        self.reads += 1
        try:
            return as_raw(await self._kube.get(resource, name, namespace=namespace))
        except (ApiError, httpx2.HTTPStatusError) as err:
            if not_found(err):
                return None
            raise

    async def _read(self, resource: Any, namespace: str, name: str) -> Raw | None:
        """The object from its cache where the publisher runs one, else from the API server
        (`_get`); a copy, so the caller may change it."""
        objects = self._objects
        if objects is not None and objects.holds(resource):
            held = objects.get(resource, namespace, name)
            return copy.deepcopy(held) if held is not None else None
        return await self._get(resource, namespace, name)

    def _wrote(self, resource: Any, written: Any) -> Raw:
        """Count a write and put what the API server answered into the cache."""
        self.writes += 1
        raw = as_raw(written)
        if self._objects is not None:
            self._objects.remember(resource, raw)
        return raw

    async def _list(
        self, resource: Any, namespace: str, labels: Mapping[str, str] | None = None
    ) -> AsyncIterator[Raw]:
        """The objects; none when their kind is not served (no CRD)."""
        self.reads += 1
        try:
            async for obj in self._kube.list(
                resource, namespace=namespace, labels=dict(labels) if labels else None
            ):
                yield as_raw(obj)
        except (ApiError, httpx2.HTTPStatusError) as err:
            if not not_found(err):
                raise

    # --- preflight --------------------------------------------------------------------

    async def _cached(self, method: str, resource: Any, namespace: str, name: str | None) -> Raw:
        """A read as the API server's watch cache holds it (`resourceVersion=0`), as OME's
        controller-runtime client reads its informer's cache. Without it a LIST is a
        consistent read, which waits for that cache to catch up with etcd: tens of
        milliseconds while maps and routes are being written."""
        response = await lightkube_adapter.send_request(
            self._kube,
            method,
            resource,
            name=name,
            namespace=namespace,
            params={"resourceVersion": "0"},
        )
        body: Raw = response.json()
        return body

    async def _all_routes(self) -> list[Raw] | BaseException:
        objects = self._objects
        if objects is not None and objects.holds(HTTPRoute):
            return objects.items(HTTPRoute)
        self.reads += 1
        try:
            items: list[Raw] = (await self._cached("list", HTTPRoute, "*", None)).get("items") or []
            return items
        except (ApiError, httpx2.HTTPStatusError) as err:
            return [] if not_found(err) else err
        except Exception as err:  # checked in OME's order by the caller
            return err

    async def preflight(self, plan: Publication, source: SourceKey) -> Seen:
        """OME's checks before any write: our names are free, and so is the hostname.

        Every read is made at once; they are checked in OME's order (the route, the
        hostname, each backend's objects), so the first problem is OME's first. Returns
        what was read, for `apply`."""
        ns = plan.route_namespace
        route_key = f"{ns}/{plan.route_name}"
        wanted: list[tuple[Any, str, str]] = [(HTTPRoute, "HTTPRoute", plan.route_name)]
        for backend in plan.backends:
            wanted.append((Service, "backend Service", backend.service))
            if self._config.hostname_endpoint_slices:
                name = endpoint_slice_name(backend)
                wanted.append((EndpointSlice, "backend EndpointSlice", name))
            if self._config.tls_enabled:
                wanted.append((BackendTLSPolicy, "BackendTLSPolicy", backend.service))
        routes, objects = await asyncio.gather(
            self._all_routes(),
            asyncio.gather(
                *(self._read(resource, ns, name) for resource, _, name in wanted),
                return_exceptions=True,
            ),
        )
        owned_or_absent(wanted[0][1], ns, wanted[0][2], objects[0], source)
        gateway = gateway_key(self._config, ns)
        if isinstance(routes, ApiError):
            raise PublishError(
                Reason.CLAIM_REJECTED,
                f"list HTTPRoutes for Gateway hostname ownership: {api_message(routes)}",
                terminal=False,
            ) from routes
        if isinstance(routes, BaseException):
            raise routes
        for route in sorted(routes, key=object_key):
            if object_key(route) == route_key:
                continue
            if publishes(route, gateway, plan.host):
                raise PublishError(
                    Reason.CLAIM_REJECTED,
                    f'Gateway hostname "{plan.host}" on {gateway[0]}/{gateway[1]} is already '
                    f"published by HTTPRoute {object_key(route)}",
                    terminal=True,
                )
        for (_, kind, name), read in zip(wanted[1:], objects[1:], strict=True):
            owned_or_absent(kind, ns, name, read, source)
        return {
            (resource, name): read if isinstance(read, dict) else None
            for (resource, _, name), read in zip(wanted, objects, strict=True)
        }

    # --- apply ------------------------------------------------------------------------

    async def _ensure(
        self,
        resource: Any,
        kind: str,
        body: Raw,
        compare: tuple[str, ...],
        seen: Seen,
        *,
        exact: bool = True,
    ) -> None:
        """Create the object, or replace it where a compared part differs; else no write.

        The API server stores routes, slices and policies as written; a Service gains
        assigned fields (its ClusterIP), so it is compared on what the body says (`exact`
        False). The object is the one the preflight read (`seen`), else it is read now.
        """
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        existing: Raw | None = None
        try:
            if (resource, name) in seen:
                existing = seen.pop((resource, name))
            else:
                existing = await self._read(resource, namespace, name)
            await self._write(resource, body, compare, exact, existing)
        except ApiError as err:
            verb = "create" if existing is None else "update"
            raise PublishError(
                Reason.APPLY_FAILED,
                f"{verb} global {kind} {namespace}/{name}: {api_message(err)}",
                terminal=False,
            ) from err

    async def _write(
        self, resource: Any, body: Raw, compare: tuple[str, ...], exact: bool, existing: Raw | None
    ) -> None:
        """Create the object, or replace `existing` where a compared part differs."""
        meta = body["metadata"]
        if existing is None:
            created = await self._kube.create(resource.from_dict(body), field_manager=FIELD_MANAGER)
            self._wrote(resource, created)
            return
        old_meta = existing.get("metadata") or {}
        same = (old_meta.get("labels") or {}) == meta["labels"] and all(
            body.get(part) == existing.get(part)
            if exact
            else subset(body.get(part), existing.get(part))
            for part in compare
        )
        if same:
            return
        replacement = dict(body)
        replacement["metadata"] = {**meta, "resourceVersion": old_meta.get("resourceVersion")}
        if resource is Service and isinstance(existing.get("spec"), dict):
            # keep what the API server assigned (a ClusterIP cannot change)
            spec = dict(body["spec"])
            for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if key in existing["spec"] and spec.get("type") == existing["spec"].get("type"):
                    spec[key] = existing["spec"][key]
            replacement["spec"] = spec
        replaced = await self._kube.replace(
            resource.from_dict(replacement), field_manager=FIELD_MANAGER
        )
        self._wrote(resource, replaced)

    async def apply(self, plan: Publication, source: SourceKey, seen: Seen | None = None) -> None:
        """Services, then slices and policies, then the route, then the pruning; compared
        with what the preflight read (`seen`)."""
        config = self._config
        seen = dict(seen or {})
        for backend in sorted(plan.backends, key=lambda b: b.service):
            body = service_body(config, plan, source, backend)
            await self._ensure(Service, "backend Service", body, ("spec",), seen, exact=False)
        for backend in plan.backends:
            if config.hostname_endpoint_slices:
                body = endpoint_slice_body(config, plan, source, backend)
                compare = ("addressType", "endpoints", "ports")
                await self._ensure(EndpointSlice, "EndpointSlice", body, compare, seen)
            if config.tls_enabled:
                body = tls_policy_body(config, plan, source, backend)
                await self._ensure(BackendTLSPolicy, "BackendTLSPolicy", body, ("spec",), seen)
        route = route_body(config, plan, source)
        await self._ensure(HTTPRoute, "HTTPRoute", route, ("spec",), seen)
        await self._prune(plan.route_namespace, source, plan.backends)

    async def _prune(self, namespace: str, source: SourceKey, keep: tuple[Backend, ...]) -> None:
        config = self._config
        kinds: list[tuple[Any, str, set[str]]] = []
        # EndpointSlices only where they may exist: their RBAC comes with the mode
        if config.hostname_endpoint_slices or config.endpoint_slices_enabled:
            slices = (
                {endpoint_slice_name(b) for b in keep} if config.hostname_endpoint_slices else set()
            )
            kinds.append((EndpointSlice, "EndpointSlice", slices))
        policies = {b.service for b in keep} if config.tls_enabled else set()
        kinds.append((BackendTLSPolicy, "BackendTLSPolicy", policies))
        kinds.append((Service, "backend Service", {b.service for b in keep}))
        selector = source_selector(*source)
        listed = await asyncio.gather(
            *(self._owned(resource, namespace, selector) for resource, _, _ in kinds),
            return_exceptions=True,
        )
        for (resource, kind, wanted), owned in zip(kinds, listed, strict=True):
            if isinstance(owned, ApiError):
                raise PublishError(
                    Reason.APPLY_FAILED,
                    f"list global {plural(kind)} for {source[0]}/{source[1]}: {api_message(owned)}",
                    terminal=False,
                ) from owned
            if isinstance(owned, BaseException):
                raise owned
            for obj in owned:
                name = (obj.get("metadata") or {}).get("name")
                if name in wanted or not owned_by(obj, *source):
                    continue
                await self._delete(resource, kind, obj)

    async def _owned(self, resource: Any, namespace: str, selector: Mapping[str, str]) -> list[Raw]:
        objects = self._objects
        if objects is not None and objects.holds(resource):
            return [obj for obj in objects.items(resource) if selected(obj, namespace, selector)]
        return [obj async for obj in self._list(resource, namespace, selector)]

    async def _delete(self, resource: Any, kind: str, obj: Raw) -> None:
        """Delete the object read as `obj`, and only that version of it (404 is done)."""
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        try:
            await fenced_delete(
                self._kube,
                resource,
                namespace,
                name,
                uid=str(meta.get("uid") or ""),
                resource_version=str(meta.get("resourceVersion") or ""),
            )
            self.writes += 1
            if self._objects is not None:
                self._objects.forget(resource, obj)
        except ApiError as err:
            if err.status.code != 404:
                raise PublishError(
                    Reason.APPLY_FAILED,
                    f"delete global {kind} {namespace}/{name}: {api_message(err)}",
                    terminal=False,
                ) from err

    # --- withdrawal -------------------------------------------------------------------

    async def _claimed_route(self, namespace: str, name: str, source: SourceKey) -> Raw | None:
        try:
            route = await self._read(HTTPRoute, namespace, name)
        except ApiError as err:
            raise PublishError(
                Reason.APPLY_FAILED,
                f"read claimed HTTPRoute {namespace}/{name}: {api_message(err)}",
                terminal=False,
            ) from err
        if route is not None and not owned_by(route, *source):
            raise PublishError(
                Reason.APPLY_FAILED,
                f"claimed HTTPRoute {namespace}/{name} is not owned by source {source[0]}/{source[1]}",
                terminal=False,
            )
        return route

    async def zero_route(
        self, namespace: str, name: str, source: SourceKey, reason: Reason = Reason.DRAIN_FAILED
    ) -> Raw | None:
        """Set every weight of a claimed route to 0; returns the route (None if gone)."""
        route = await self._claimed_route(namespace, name, source)
        if route is None or not zero_weights(route):
            return route
        try:
            replaced = await self._kube.replace(
                HTTPRoute.from_dict(route), field_manager=FIELD_MANAGER
            )
        except ApiError as err:
            raise PublishError(
                reason,
                f"zero claimed HTTPRoute {namespace}/{name} backend weights: {api_message(err)}",
                terminal=False,
            ) from err
        return self._wrote(HTTPRoute, replaced)

    async def withdraw_route(self, namespace: str, name: str, source: SourceKey) -> None:
        """Zero, delete and confirm the deletion of a claimed route."""
        route = await self.zero_route(namespace, name, source, Reason.APPLY_FAILED)
        if route is None:
            return
        if not (route.get("metadata") or {}).get("deletionTimestamp"):
            await self._delete(HTTPRoute, "HTTPRoute", route)
        try:
            remaining = await self._get(HTTPRoute, namespace, name)
        except ApiError as err:
            raise PublishError(
                Reason.APPLY_FAILED,
                f"confirm claimed HTTPRoute {namespace}/{name} deletion: {api_message(err)}",
                terminal=False,
            ) from err
        if remaining is not None:
            raise PublishError(
                Reason.APPLY_FAILED,
                f"claimed HTTPRoute {namespace}/{name} deletion is pending",
                terminal=False,
            )

    async def delete_source_objects(self, namespace: str, source: SourceKey) -> None:
        """Every slice, policy and Service published for the service in one namespace."""
        await self._prune(namespace, source, ())
