"""The routing controller's ramps (ours, opt-in): which services ramp, and the map's part.

A service ramps when its annotation `routing.ome-routing.io/max-increase-per-period` or
the chart's `routing.ramp.maxIncreasePerPeriod` sets a fraction (the annotation wins). A
bad annotation is logged once per service and value, with the annotation and the value,
and the ramp is off for that service: its map is written exactly as without one.

`Ramps.apply` takes the view OME's rules built (the targets), and returns it with the
ramped weights (`core.ramps`), the annotation `routing.ome-routing.io/ramp` to put on the
map, and when to look at the service again (the next step). With no ramp for the service
it returns the view unchanged and asks only to remove an annotation a ramp left behind:
no ramp anywhere, no new request.

The writes are the routing controller's own (`kube.controller`), through the fenced
client like every other write of the leader.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ome_routing.core.config import OperatorConfig
from ome_routing.core.durations import Duration
from ome_routing.core.ramps import (
    DEFAULT_PERIOD,
    MAX_INCREASE_ANNOTATION,
    RAMP_ANNOTATION,
    MaxIncrease,
    RampSettingError,
    Target,
    evaluate,
    parse_max_increase,
    state_from_annotation,
    state_to_annotation,
)
from ome_routing.core.trafficmap import TrafficMapView
from ome_routing.core.weights import factor_milli, routable_replicas
from ome_routing.kube.ownership import meta
from ome_routing.kube.reconcile import RawObject, Routed

log = logging.getLogger("ome_routing.ramps")

ServiceKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class RampResult:
    view: TrafficMapView
    #: the map's `routing.ome-routing.io/ramp` as it should be; None: absent
    annotation: str | None
    #: seconds until the next step, while a home is still rising
    requeue_after: float | None = None

    def annotation_patch(self, tmap: RawObject | None) -> dict[str, Any] | None:
        """`metadata.annotations` for a merge patch, None when the map has it already."""
        held = (meta(tmap).get("annotations") or {}).get(RAMP_ANNOTATION) if tmap else None
        if held == self.annotation:
            return None
        return {RAMP_ANNOTATION: self.annotation}


class Ramps:
    def __init__(self, config: OperatorConfig) -> None:
        self._config = config
        #: the bad annotation value last logged, per service
        self._logged: dict[ServiceKey, str] = {}

    def setting(self, key: ServiceKey, isvc: RawObject) -> MaxIncrease | None:
        """The service's ramp: its annotation's, else the chart's; None when off."""
        annotations = meta(isvc).get("annotations") or {}
        if MAX_INCREASE_ANNOTATION not in annotations:
            self._logged.pop(key, None)
            return self._config.ramp
        value = annotations[MAX_INCREASE_ANNOTATION]
        try:
            setting = parse_max_increase(value, MAX_INCREASE_ANNOTATION)
        except RampSettingError as err:
            if self._logged.get(key) != str(value):
                self._logged[key] = str(value)
                log.warning(
                    "%s; the ramp is off for this InferenceService",
                    err,
                    extra={"isvc": f"{key[0]}/{key[1]}"},
                )
            return None
        self._logged.pop(key, None)
        return setting if setting is not None else self._config.ramp

    def apply(
        self,
        key: ServiceKey,
        isvc: RawObject,
        tmap: RawObject | None,
        routed: Routed,
        view: TrafficMapView,
        now: datetime,
    ) -> RampResult:
        setting = self.setting(key, isvc)
        if setting is None:
            return RampResult(view, None)
        spec = (tmap or {}).get("spec") or {}
        published = {
            str(e.get("cluster")): int(e.get("weight") or 0)
            for e in spec.get("entries") or []
            if isinstance(e, Mapping)
        }
        held = (meta(tmap).get("annotations") or {}).get(RAMP_ANNOTATION) if tmap else None
        targets = [
            Target(
                e.cluster,
                e.weight,
                routable_replicas(e.capacity.allocated, e.capacity.ready)
                * factor_milli(e.capacity.factor.value if e.capacity.factor else None),
            )
            for e in view.entries
        ]
        result = evaluate(
            targets, published, state_from_annotation(held), setting, _period(routed), now
        )
        entries = tuple(
            replace(e, weight=w) for e, w in zip(view.entries, result.weights, strict=True)
        )
        requeue = result.requeue_after
        return RampResult(
            replace(view, entries=entries),
            state_to_annotation(result.state),
            requeue.total_seconds() if requeue is not None else None,
        )

    def forget(self, key: ServiceKey) -> None:
        self._logged.pop(key, None)


def _period(routed: Routed) -> Duration:
    """A step a period: the service's poll's, else its probe's, else 10s."""
    if routed.poll is not None:
        return routed.poll.period
    if routed.probe is not None:
        return routed.probe.period
    return DEFAULT_PERIOD


def with_annotations(patch: dict[str, Any], marks: Mapping[str, Any] | None) -> dict[str, Any]:
    """A map's merge patch that also sets (or, with None, removes) these annotations."""
    if marks:
        patch["metadata"] = {**patch.get("metadata", {}), "annotations": dict(marks)}
    return patch


def annotations_only(tmap: RawObject, marks: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of these annotations alone, on the map's resourceVersion."""
    return with_annotations(
        {"metadata": {"resourceVersion": meta(tmap).get("resourceVersion")}}, marks
    )
