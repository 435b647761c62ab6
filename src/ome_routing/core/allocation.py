"""How a home's capacity ceiling caps its admitted replicas (`capacity.allocated`).

A report can lower a home's `capacity.allocated` but never raise it: allocated is the
lower of the admitted replicas and the ceiling; `source` is `Endpoint` only when the
ceiling is what lowered it; `reported` is the ceiling while the home has one. The
ceiling itself is the window's (`core.capacity`). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CapacitySource(StrEnum):
    """Where a home's `capacity.allocated` comes from."""

    CONTROL_PLANE = "ControlPlane"
    ENDPOINT = "Endpoint"


@dataclass(frozen=True, slots=True)
class Allocation:
    """A home's `capacity.allocated`, `capacity.source` and `capacity.reported`."""

    allocated: int
    source: CapacitySource
    reported: int | None


def allocate(admitted: int, ceiling: int | None) -> Allocation:
    """Cap the admitted replicas at the ceiling; without a ceiling, fall back to admitted."""
    if ceiling is None:
        return Allocation(admitted, CapacitySource.CONTROL_PLANE, None)
    if ceiling < admitted:
        return Allocation(ceiling, CapacitySource.ENDPOINT, ceiling)
    return Allocation(admitted, CapacitySource.CONTROL_PLANE, ceiling)
