"""Shadow policies on the cluster: judge each routed service's shadow, keep its ShadowTrafficMap.

Not OME's; nothing happens for a service without a shadow (`core.shadow`): no request,
no log line, no metric series. For one with a shadow, every time its TrafficMap is
reconciled:

- `evaluate` (no I/O) judges the shadow on the same inputs as the live table: the
  placement, the drains, the live windows' readings (`core.shadow.shadow_verdict`) and
  the live probe states, and compares the two tables home by home. It reads the live
  view and never changes it: the live table is built before, and without, the shadow.
- The controller judges a shadowed service again one live `period` after each reconcile:
  a poll that moves no live verdict wakes no reconcile, and the shadow reads every poll.
- `ShadowMaps.sync` writes the result as a `ShadowTrafficMap` of the same name
  (`routing.ome-routing.io/v1alpha1`), controlled by the TrafficMap so that it goes with
  it, through the controller's fenced client, only when its content changed (created,
  then server-side applied); it deletes it (with the UID precondition) when the shadow is removed or cannot
  be used, and sets `ome_routing_shadow_divergent_homes`.

A shadow that cannot be used is logged once per message (`shadow routing policy
ignored`, with the service and the error naming the field and the value) and is off for
that service; the live map is written exactly as without it.

What this process wrote is remembered in memory: a shadow removed while no controller
ran leaves its ShadowTrafficMap until the TrafficMap goes (or an operator deletes it).

Errors: an API failure of a shadow write is logged and retried at the next reconcile;
it never fails the live reconcile. `NotLeader` (the fence) propagates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType

from ome_routing.core.capacity import Verdict, Window
from ome_routing.core.config import OperatorConfig
from ome_routing.core.policy import RoutingPolicy
from ome_routing.core.shadow import (
    API_VERSION,
    GROUP,
    KIND,
    VERSION,
    HomeDifference,
    ShadowError,
    compare,
    difference_to_json,
    not_evaluated,
    resolve_shadow,
    shadow_source,
    shadow_verdict,
)
from ome_routing.core.trafficmap import TrafficMapView, entries_to_json
from ome_routing.kube.mapwrites import raw
from ome_routing.kube.ownership import meta
from ome_routing.kube.reconcile import Routed, build_view, go_url_string
from ome_routing.kube.resources import API_VERSION as OME_API_VERSION
from ome_routing.kube.resources import FIELD_MANAGER, fenced_delete
from ome_routing.kube.watching import RawObject
from ome_routing.metrics import RoutingMetrics

log = logging.getLogger("ome_routing.shadow")

ShadowTrafficMap = create_namespaced_resource(GROUP, VERSION, KIND, "shadowtrafficmaps")

ServiceKey = tuple[str, str]
ProbeStates = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ShadowResult:
    """A shadow judged: where it came from, its policy and table, and live beside it."""

    source: str
    policy: RoutingPolicy
    view: TrafficMapView | None
    homes: tuple[HomeDifference, ...]
    not_evaluated: tuple[tuple[str, str], ...]

    @property
    def divergent(self) -> int:
        return sum(1 for home in self.homes if home.divergent)


def evaluate(
    isvc: RawObject,
    routed: Routed,
    live: TrafficMapView,
    windows: Callable[[str], Window | None],
    probes: ProbeStates | None,
    config: OperatorConfig,
    now: datetime,
) -> ShadowResult | None:
    """The service's shadow judged on the live inputs; None when it has none.

    `windows` gives a home's live window by cluster. Raises `ShadowError`.
    """
    annotations = meta(isvc).get("annotations")
    source = shadow_source(annotations if isinstance(annotations, Mapping) else None, config.shadow)
    if source is None:
        return None
    spec = isvc.get("spec") or {}
    policy = resolve_shadow(spec.get("routing"), source, config)
    view: TrafficMapView | None = None
    if policy.enabled:
        verdicts: dict[str, Verdict | None] = {}
        poll = policy.capacity
        if poll is not None:
            live_polls = routed.poll is not None
            for home in routed.placement.homes:
                window = windows(home.cluster) if live_polls else None
                verdicts[home.cluster] = shadow_verdict(window, poll, now)
        view = build_view(replace(routed, policy=policy), verdicts, dict(probes or {}))
    homes = compare(live.entries, view.entries if view is not None else ())
    return ShadowResult(source.field, policy, view, homes, not_evaluated(routed.policy, policy))


def shadow_body(namespace: str, name: str, tmap: RawObject, result: ShadowResult) -> dict[str, Any]:
    """The ShadowTrafficMap as applied: controlled by the TrafficMap, its status the result."""
    entries: list[dict[str, Any]] = []
    if result.view is not None:
        entries = entries_to_json(result.view)
        for entry in entries:
            if "endpoint" in entry:
                entry["endpoint"] = go_url_string(entry["endpoint"])
    status: dict[str, Any] = {
        "source": result.source,
        "routed": result.policy.enabled,
        "entries": entries,
        "homes": [difference_to_json(home) for home in result.homes],
        "divergentHomes": result.divergent,
    }
    if result.not_evaluated:
        status["notEvaluated"] = [
            {"field": field, "reason": why} for field, why in result.not_evaluated
        ]
    fields = meta(tmap)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": OME_API_VERSION,
                    "kind": "TrafficMap",
                    "name": name,
                    "uid": str(fields.get("uid")),
                    "controller": True,
                }
            ],
        },
        "status": status,
    }


def _content(body: Mapping[str, Any]) -> tuple[Any, Any]:
    """What a write changes: the owner and the status."""
    metadata = body.get("metadata") or {}
    return metadata.get("ownerReferences"), body.get("status")


class ShadowMaps:
    """The ShadowTrafficMaps this controller keeps, written only when they change."""

    def __init__(
        self,
        client: AsyncClient,
        config: OperatorConfig,
        metrics: RoutingMetrics,
        clock: Callable[[], datetime],
    ) -> None:
        self._kube = client
        self._config = config
        self._metrics = metrics
        self._clock = clock
        #: key -> (the map's UID, what it holds), for the maps this process wrote or read
        self._held: dict[ServiceKey, tuple[str, tuple[Any, Any]]] = {}
        #: key -> the last error logged, so that a bad shadow is logged once per message
        self._logged: dict[ServiceKey, str] = {}
        #: key -> the last write error logged, likewise
        self._write_errors: dict[ServiceKey, str] = {}

    async def sync(
        self,
        key: ServiceKey,
        isvc: RawObject,
        routed: Routed,
        live: TrafficMapView,
        windows: Callable[[str], Window | None],
        probes: ProbeStates | None,
        tmap: RawObject,
    ) -> bool:
        """Judge the service's shadow and keep its ShadowTrafficMap in line; whether it has
        a usable shadow (to be judged again after the next poll)."""
        try:
            result = evaluate(isvc, routed, live, windows, probes, self._config, self._clock())
        except ShadowError as err:
            if self._logged.get(key) != str(err):
                self._logged[key] = str(err)
                log.error(
                    "shadow routing policy ignored",
                    extra={"isvc": f"{key[0]}/{key[1]}", "error": str(err)},
                )
            result = None
        else:
            self._logged.pop(key, None)
        if result is None:
            await self.forget(key)
            return False
        self._metrics.shadow_divergence.set(key[0], key[1], result.divergent)
        body = shadow_body(key[0], key[1], tmap, result)
        content = _content(body)
        try:
            held = self._held.get(key)
            if held is None:
                stored = await self._read(key)
                if stored is not None:
                    held = self._held[key] = (str(meta(stored).get("uid")), _content(stored))
            if held is not None and held[1] == content:
                return True
            if held is None:
                # a create, not an apply that creates: RBAC asks for `create` on an apply
                # that creates, and the audit log shows it as `patch`
                written = await self._kube.create(
                    ShadowTrafficMap.from_dict(body), field_manager=FIELD_MANAGER
                )
            else:
                written = await self._kube.patch(
                    ShadowTrafficMap,
                    key[1],
                    body,
                    namespace=key[0],
                    patch_type=PatchType.APPLY,
                    field_manager=FIELD_MANAGER,
                    force=True,
                )
        except ApiError as err:
            self._held.pop(key, None)
            message = str(err.status.message)
            if self._write_errors.get(key) != message:  # once per message: it is retried often
                self._write_errors[key] = message
                log.error(
                    "write ShadowTrafficMap",
                    extra={"isvc": f"{key[0]}/{key[1]}", "error": message},
                )
            return True
        self._write_errors.pop(key, None)
        self._metrics.writes.labels(kind="shadow").inc()
        stored = raw(written)
        self._held[key] = (str(meta(stored).get("uid")), _content(stored))
        log.info(
            "shadow trafficmap written",
            extra={
                "isvc": f"{key[0]}/{key[1]}",
                "source": result.source,
                "divergentHomes": result.divergent,
            },
        )
        return True

    def drop(self, key: ServiceKey) -> None:
        """The TrafficMap is gone or going (its ShadowTrafficMap goes with it): forget both."""
        self._metrics.shadow_divergence.remove(key[0], key[1])
        self._held.pop(key, None)
        self._logged.pop(key, None)
        self._write_errors.pop(key, None)

    async def forget(self, key: ServiceKey) -> None:
        """The service has no usable shadow now: delete the map this process holds for it."""
        self._metrics.shadow_divergence.remove(key[0], key[1])
        held = self._held.pop(key, None)
        if held is None:
            return
        try:
            await fenced_delete(
                self._kube, ShadowTrafficMap, key[0], key[1], uid=held[0], resource_version=""
            )
        except ApiError as err:
            if err.status.code not in (404, 409):
                self._held[key] = held
                log.error(
                    "delete ShadowTrafficMap",
                    extra={"isvc": f"{key[0]}/{key[1]}", "error": err.status.message},
                )
                return
        self._metrics.writes.labels(kind="shadow-delete").inc()

    async def _read(self, key: ServiceKey) -> RawObject | None:
        try:
            stored = await self._kube.get(ShadowTrafficMap, key[1], namespace=key[0])
        except ApiError as err:
            if err.status.code == 404:
                return None
            raise
        return raw(stored)
