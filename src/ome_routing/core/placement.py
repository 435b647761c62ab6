"""Which workload clusters are an InferenceService's homes, read from its placement.

The placement controller (not part of this project) writes `status.placement`: a `phase` and
one candidate per workload cluster it considered. A candidate is a home when its `phase` is
`Admitted` and it reports an `endpoint`, and only while the placement `phase` is `Placed`.

Raw Kubernetes JSON comes in as plain mappings; a field of the wrong type is an error that
names the field and the value (`PlacementError`), so that one bad object stops one map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PLACED = "Placed"
ADMITTED = "Admitted"
DEFAULT_MODE = "Single"


class PlacementError(ValueError):
    """`status.placement` or `spec.placement` holds a value of the wrong shape."""


@dataclass(frozen=True, slots=True)
class PlacedHome:
    """One admitted cluster with an endpoint."""

    cluster: str
    endpoint: str
    admitted: int
    ready: int


@dataclass(frozen=True, slots=True)
class Placement:
    """The placement facts routing needs: whether it is placed, and the homes."""

    mode: str
    placed: bool
    homes: tuple[PlacedHome, ...]


def _count(candidate: Mapping[str, Any], field: str, index: int) -> int:
    value = candidate.get(field, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlacementError(
            f"status.placement.candidates[{index}].{field} must be a whole number 0 or more, got {value!r}"
        )
    return value


def read_placement(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Placement:
    """The mode, phase and homes of an InferenceService, from its `spec` and `status`."""
    spec_placement = spec.get("placement")
    mode = DEFAULT_MODE
    if isinstance(spec_placement, Mapping) and spec_placement.get("mode"):
        mode = str(spec_placement["mode"])
    placement = status.get("placement") or {}
    if not isinstance(placement, Mapping):
        raise PlacementError(f"status.placement must be an object, got {placement!r}")
    placed = placement.get("phase") == PLACED
    candidates = placement.get("candidates") or []
    if not isinstance(candidates, Sequence) or isinstance(candidates, str):
        raise PlacementError(f"status.placement.candidates must be a list, got {candidates!r}")
    homes: dict[str, PlacedHome] = {}
    if placed:
        for index, candidate in enumerate(candidates):
            if not isinstance(candidate, Mapping):
                raise PlacementError(
                    f"status.placement.candidates[{index}] must be an object, got {candidate!r}"
                )
            cluster = candidate.get("cluster")
            endpoint = candidate.get("endpoint") or ""
            if candidate.get("phase") != ADMITTED or not endpoint:
                continue
            if not isinstance(cluster, str) or not cluster:
                raise PlacementError(
                    f"status.placement.candidates[{index}].cluster must be a name, got {cluster!r}"
                )
            if not isinstance(endpoint, str):
                raise PlacementError(
                    f"status.placement.candidates[{index}].endpoint must be a URL, got {endpoint!r}"
                )
            if cluster in homes:
                raise PlacementError(
                    f"status.placement.candidates[{index}].cluster {cluster!r} appears twice"
                )
            homes[cluster] = PlacedHome(
                cluster=cluster,
                endpoint=endpoint,
                admitted=_count(candidate, "admittedReplicas", index),
                ready=_count(candidate, "readyReplicas", index),
            )
    return Placement(
        mode=mode, placed=placed, homes=tuple(sorted(homes.values(), key=lambda h: h.cluster))
    )
