"""`simulate --max-increase-per-period`: the replayed home's ramped weight beside its target.

The trace is one home's; the rest of the service is `--others` routable replicas, held
steady (factor 1, as the home's). Each poll is one evaluation of the controller's ramp
(`core.ramps.evaluate`), at the poll's `at` time with `--period` between steps, from the
weights the previous poll published: the first poll publishes its targets (a new map),
and a later rise of the home's routable replicas is ramped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Protocol, TypeVar

from ome_routing.core.durations import Duration
from ome_routing.core.ramps import MaxIncrease, RampState, Target, evaluate
from ome_routing.core.weights import MILLI, normalize

HOME = "home"
OTHERS = "others"


class Step(Protocol):
    """A replayed poll (`simulate.Step`): when, and the home's routable replicas."""

    @property
    def at(self) -> datetime: ...

    @property
    def routable(self) -> int | None: ...


S = TypeVar("S", bound=Step)


def ramp_fields(
    steps: Iterable[S], setting: MaxIncrease, others: int, period: Duration
) -> Iterator[tuple[S, dict[str, object]]]:
    """Each step with its fields: `targetWeight`, `weight`, `othersTargetWeight`,
    `othersWeight` and `periodsLeft` (the home's)."""
    state: RampState | None = None
    published: dict[str, int] = {}
    for step in steps:
        capacities = [(step.routable or 0) * MILLI, others * MILLI]
        targets = [
            Target(cluster, weight, capacity)
            for cluster, weight, capacity in zip(
                (HOME, OTHERS), normalize(capacities), capacities, strict=True
            )
        ]
        result = evaluate(targets, published, state, setting, period, step.at)
        state = result.state
        published = dict(zip((HOME, OTHERS), result.weights, strict=True))
        yield (
            step,
            {
                "targetWeight": targets[0].weight,
                "weight": result.weights[0],
                "othersTargetWeight": targets[1].weight,
                "othersWeight": result.weights[1],
                "periodsLeft": state.homes[HOME].periods_left,
            },
        )
