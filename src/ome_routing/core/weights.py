"""TrafficMap weights: each home's share of the requests, as OME computes them.

1. Routable replicas: the lower of `capacity.allocated` and `capacity.ready`. A capacity
   ceiling has already lowered `allocated`, so a ceiling of 0 gives 0 here, whatever any
   probe policy says.
2. The raw weight: routable replicas times the factor in thousandths (OME's
   `factorMilli`: a factor finer than 1/1000 rounds up, so `1.0001` counts as `1.001`;
   an unset factor counts as 1). A home that a routing health probe gates gets 0. When
   the probe gates every home and `allFailedPolicy` is `PreserveTraffic`, the gates are
   ignored instead.
3. Divide by the GCD of the raw weights. If the largest is then above 1,000,000, scale
   every weight so the largest is 1,000,000, rounding positive weights up so nothing
   positive becomes 0; there is no second GCD after this (OME's `3000001:1000000` gives
   `1000000:333334`).
4. A home the accepted placement plan asks to drain (`drainRequested`) gets 0, then a
   home a traffic-drain override holds gets 0; the other homes keep their weights (and so
   their ratio). What the manual drains took away is judged after the plan's drains.

Integer arithmetic throughout: no weight depends on float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

MAX_WEIGHT = 1_000_000
#: A factor counts in thousandths, as a Kubernetes quantity's milli-value.
MILLI = 1000


class AllFailedPolicy(StrEnum):
    """What a probe does when it gates every home."""

    PRESERVE_TRAFFIC = "PreserveTraffic"
    DRAIN = "Drain"


@dataclass(frozen=True, slots=True)
class WeightInput:
    """What one home's weight depends on."""

    allocated: int
    ready: int
    factor: Fraction = Fraction(1)
    probe_gated: bool = False
    drained: bool = False
    #: the accepted placement plan drains the home (`allocation.drainRequested`)
    plan_drained: bool = False

    def __post_init__(self) -> None:
        if self.allocated < 0 or self.ready < 0:
            raise ValueError(
                f"allocated ({self.allocated}) and ready ({self.ready}) must not be negative"
            )
        if self.factor <= 0:
            raise ValueError(f"factor ({self.factor}) must be positive")


@dataclass(frozen=True, slots=True)
class Weights:
    """The weights, in input order, and what the probe and drains did to them."""

    weights: tuple[int, ...]
    #: The weights after the plan's drains, before the manual ones: what those took away.
    before_drains: tuple[int, ...]
    #: Step 1's counts: the replicas each home could serve, before probes and factors.
    routable: tuple[int, ...]
    #: Step 2's raw weights, before probes: routable replicas times the milli-factor.
    raw: tuple[int, ...]
    #: The probe gates every home (and there is at least one).
    all_gated: bool
    #: All homes gated under `PreserveTraffic`: the gates were ignored.
    gates_ignored: bool


def routable_replicas(allocated: int, ready: int) -> int:
    """Step 1: the replicas that can serve."""
    return max(0, min(allocated, ready))


def factor_milli(factor: Fraction | None) -> int:
    """The factor in thousandths, rounded up; unset or non-positive counts as 1 (1000)."""
    if factor is None or factor <= 0:
        return MILLI
    return math.ceil(factor * MILLI)


def raw_weight(allocated: int, ready: int, factor: Fraction | None = None) -> int:
    """Step 2 before probes: routable replicas times the factor in thousandths."""
    return routable_replicas(allocated, ready) * factor_milli(factor)


def compute_weights(
    homes: Sequence[WeightInput], all_failed_policy: AllFailedPolicy | None = None
) -> Weights:
    """Weigh the homes; a probe with no `allFailedPolicy` leaves gated homes at 0."""
    routable = tuple(routable_replicas(h.allocated, h.ready) for h in homes)
    raw = tuple(raw_weight(h.allocated, h.ready, h.factor) for h in homes)
    all_gated = bool(homes) and all(h.probe_gated for h in homes)
    gates_ignored = all_gated and all_failed_policy is AllFailedPolicy.PRESERVE_TRAFFIC
    open_raw = [
        0 if h.probe_gated and not gates_ignored else w for h, w in zip(homes, raw, strict=True)
    ]
    planned = tuple(
        0 if h.plan_drained else w for h, w in zip(homes, normalize(open_raw), strict=True)
    )
    final = tuple(0 if h.drained else w for h, w in zip(homes, planned, strict=True))
    return Weights(
        weights=final,
        before_drains=planned,
        routable=routable,
        raw=raw,
        all_gated=all_gated,
        gates_ignored=gates_ignored,
    )


def normalize(raw: Sequence[int], limit: int = MAX_WEIGHT) -> list[int]:
    """Step 3: divide by the GCD, then cap the largest at `limit`; all zeros stay zeros."""
    if any(w < 0 for w in raw):
        raise ValueError("raw weights must not be negative")
    gcd = math.gcd(*raw) if raw else 0
    if gcd == 0:
        return list(raw)
    return cap_weights([w // gcd for w in raw], limit)


def cap_weights(weights: Sequence[int], limit: int = MAX_WEIGHT) -> list[int]:
    """Scale down so the largest is `limit`, rounding positive weights up.

    Rounding up keeps every positive weight positive, and never pushes a weight past
    `limit`, since the largest maps to exactly `limit`. The result is not reduced
    again, as OME's is not.
    """
    largest = max(weights, default=0)
    if largest <= limit:
        return list(weights)
    return [-(-w * limit // largest) for w in weights]
