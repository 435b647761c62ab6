"""`kubectl ome get trafficmaps`: OME's columns for TrafficMaps.

`NAME MODE TARGETS ROUTABLE PUBLISHED AGE`, and with `-o wide` also `SERVICE ACTIVE
HEALTHY OVERRIDE OVERRIDE-REASON REASON GATEWAY PUBLISHER-FRESHNESS`. A condition counts
only while it was written for the map's current generation: an older one reads `Unknown`
(its reason `-`), so that a stale routing decision never looks live.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ome_routing.kubectl.objects import Condition, TrafficMap

__all__ = ["CANONICAL", "COLUMNS", "WIDE_COLUMNS", "human_duration", "resolve", "rows"]

CANONICAL = "trafficmaps"
ALIASES = ("trafficmap", "tm", "tmap")
COLUMNS = ("NAME", "MODE", "TARGETS", "ROUTABLE", "PUBLISHED", "AGE")
WIDE_COLUMNS = (
    "SERVICE",
    "ACTIVE",
    "HEALTHY",
    "OVERRIDE",
    "OVERRIDE-REASON",
    "REASON",
    "GATEWAY",
    "PUBLISHER-FRESHNESS",
)


class UnknownResource(ValueError):
    pass


def resolve(resource: str) -> str:
    """The canonical resource name for `resource` (case-insensitive), or `UnknownResource`."""
    needle = resource.lower()
    if needle == CANONICAL or needle in ALIASES:
        return CANONICAL
    raise UnknownResource(f'unknown resource "{resource}" (valid resources: {CANONICAL})')


def _or_dash(value: str) -> str:
    return value or "-"


def _current(tmap: TrafficMap, kind: str) -> Condition | None:
    """The first condition of `kind`, if it was written for the current generation."""
    for condition in tmap.conditions:
        if condition.type == kind:
            return condition if condition.observed_generation == tmap.meta.generation else None
    return None


def _status(tmap: TrafficMap, kind: str) -> str:
    condition = _current(tmap, kind)
    return "Unknown" if condition is None else condition.status


def _reason(tmap: TrafficMap, kind: str) -> str:
    condition = _current(tmap, kind)
    return "-" if condition is None else _or_dash(condition.reason)


def _gateway(tmap: TrafficMap) -> str:
    if tmap.gateway is None:
        return "-"
    group, kind, namespace, name = tmap.gateway
    namespace = namespace or tmap.meta.namespace
    return f"{group or 'core'}/{_or_dash(kind)}:{_or_dash(namespace)}/{_or_dash(name)}"


def _publisher_freshness(tmap: TrafficMap) -> str:
    observed = tmap.observed_generation
    if observed == 0:
        return "Unobserved"
    return "Current" if observed == tmap.meta.generation else "Stale"


def human_duration(seconds: float) -> str:
    """Kubernetes' `HumanDuration`, as kubectl shows an age."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(created: datetime | None, now: datetime) -> str:
    return "<unknown>" if created is None else human_duration((now - created).total_seconds())


def row(tmap: TrafficMap, now: datetime, *, wide: bool) -> list[str]:
    cells = [
        tmap.meta.name,
        _or_dash(tmap.mode),
        str(len(tmap.entries)),
        _status(tmap, "Routable"),
        _status(tmap, "Published"),
        age(tmap.meta.created, now),
    ]
    if wide:
        cells += [
            _or_dash(tmap.service),
            str(sum(1 for entry in tmap.entries if entry.weight > 0)),
            str(sum(1 for entry in tmap.entries if entry.healthy)),
            _status(tmap, "OverrideActive"),
            _reason(tmap, "OverrideActive"),
            _reason(tmap, "Routable"),
            _gateway(tmap),
            _publisher_freshness(tmap),
        ]
    return cells


def rows(
    maps: Sequence[TrafficMap], now: datetime, *, wide: bool, namespaces: bool
) -> tuple[list[str], list[list[str]]]:
    """The table's headers and rows (`namespaces`: a NAMESPACE column first, for `-A`)."""
    headers = list(COLUMNS) + (list(WIDE_COLUMNS) if wide else [])
    body = [row(tmap, now, wide=wide) for tmap in maps]
    if namespaces:
        headers.insert(0, "NAMESPACE")
        body = [
            [_or_dash(tmap.meta.namespace), *cells] for tmap, cells in zip(maps, body, strict=True)
        ]
    return headers, body
