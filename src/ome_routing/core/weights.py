"""TrafficMap weights: each home's share of the requests, in four steps.

1. Routable replicas: the lower of `capacity.allocated` and `capacity.ready`, times the
   home's capacity factor (1 when unset). A capacity ceiling has already lowered
   `allocated`, so a ceiling of 0 gives 0 here, whatever any probe policy says.
2. A home that a routing health probe gates gets 0. When the probe gates every home and
   `allFailedPolicy` is `PreserveTraffic`, the gates are ignored instead.
3. The smallest whole-number ratio: fractional factors are scaled by the LCM of their
   denominators, then everything is divided by the GCD. Each weight is then kept within
   0..1,000,000, scaling down proportionally and rounding positive weights up, so that
   nothing positive becomes 0.
4. A drained home gets 0; the other homes keep their weights (and so their ratio).

Exact arithmetic (`Fraction`) throughout: no weight depends on float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

MAX_WEIGHT = 1_000_000


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
    #: The weights after step 3, before drains: what drains took away.
    before_drains: tuple[int, ...]
    #: Step 1's counts, before probes: what each home could serve.
    routable: tuple[Fraction, ...]
    #: The probe gates every home (and there is at least one).
    all_gated: bool
    #: All homes gated under `PreserveTraffic`: the gates were ignored.
    gates_ignored: bool


def routable_replicas(allocated: int, ready: int, factor: Fraction = Fraction(1)) -> Fraction:
    """Step 1: the replicas that can serve, counted with the home's factor."""
    return min(allocated, ready) * factor


def compute_weights(
    homes: Sequence[WeightInput], all_failed_policy: AllFailedPolicy | None = None
) -> Weights:
    """Weigh the homes; a probe with no `allFailedPolicy` leaves gated homes at 0."""
    routable = tuple(routable_replicas(h.allocated, h.ready, h.factor) for h in homes)
    all_gated = bool(homes) and all(h.probe_gated for h in homes)
    gates_ignored = all_gated and all_failed_policy is AllFailedPolicy.PRESERVE_TRAFFIC
    open_counts = [
        Fraction(0) if h.probe_gated and not gates_ignored else count
        for h, count in zip(homes, routable, strict=True)
    ]
    reduced = cap_weights(reduce_ratio(open_counts))
    final = tuple(0 if h.drained else w for h, w in zip(homes, reduced, strict=True))
    return Weights(
        weights=final,
        before_drains=tuple(reduced),
        routable=routable,
        all_gated=all_gated,
        gates_ignored=gates_ignored,
    )


def reduce_ratio(counts: Sequence[Fraction]) -> list[int]:
    """The smallest whole numbers in the same ratio; all zeros stay zeros."""
    if any(c < 0 for c in counts):
        raise ValueError("counts must not be negative")
    lcm = math.lcm(*(c.denominator for c in counts)) if counts else 1
    whole = [int(c * lcm) for c in counts]
    gcd = math.gcd(*whole) if whole else 0
    if gcd == 0:
        return whole
    return [w // gcd for w in whole]


def cap_weights(weights: Sequence[int], limit: int = MAX_WEIGHT) -> list[int]:
    """Scale down so the largest is `limit`, rounding positive weights up; then reduce again.

    Rounding up keeps every positive weight positive, and never pushes a weight past
    `limit`, since the largest maps to exactly `limit`.
    """
    largest = max(weights, default=0)
    if largest <= limit:
        return list(weights)
    scaled = [-(-w * limit // largest) for w in weights]
    return reduce_ratio([Fraction(w) for w in scaled])
