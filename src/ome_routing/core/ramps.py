"""Opt-in ramps: a home's weight rises over several periods instead of in one step.

Not OME: OME publishes each evaluation's weights at once. With a ramp configured
(`maxIncreasePerPeriod`, a fraction f in (0, 1]), the map carries *ramped* weights; the
weights OME would write are the *targets*.

The rule is kept per home, in the units the weights are made of: a home's *capacity* is
its routable replicas times its factor (OME's raw weight, step 2 of `core.weights`), or 0
when OME gives it weight 0 (a probe gate, a drain, no routable replica). Each home has a
*ramped capacity* r:

- per step, r may rise by at most f x its capacity, and never above it:
  r = min(capacity, r_before + f x capacity);
- a fall applies at once: a capacity below r lowers r to it; a gate or drain (capacity
  0) and a removed home give 0 at once;
- a home seen for the first time starts at its capacity when the map already serves it
  (weight > 0), else at 0 (a new or recovering home);
- when no home serves (a new map, or every home that served is gated, drained or gone),
  there is no other home to take the traffic: every home takes its capacity at once.

The weights are the ramped capacities made integers as OME's are (divided by their GCD,
capped at 1,000,000 rounding positive weights up, so a first step is never 0); once
every home has reached its capacity the targets are published verbatim. Other homes are
not held back, so they keep their capacities and take what a rising home cannot yet.
A home that starts from 0 reaches its capacity in ceil(1/f) steps; one that starts
from r in ceil((capacity - r) / (f x capacity)).

Steps come at most once a period (`evaluate`): the first at once when no ramp is under
way, the next a period after the last. The map's annotation
`routing.ome-routing.io/ramp` carries each home's target and ramped weight, its
capacity and ramped capacity (in replicas), the periods left and the time of the last
step, so a restart or a new leader resumes the ramp from the map alone.

Worked example (f = 0.25): worker-a and worker-b have 2 replicas each (targets 1:1);
worker-b's gate opens again. Its ramped capacity goes 0.5, 1, 1.5, 2 replicas, one step a
period: weights 4:1, 2:1, 4:3, 1:1 (worker-b's share 1/5, 1/3, 3/7, 1/2), at its target
in ceil(1/0.25) = 4 steps, the first when it recovers.

Pure: `now` is an argument. Errors: `RampSettingError` (a `ValueError`) names the field
as the user spells it and the value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from ome_routing.core.durations import Duration
from ome_routing.core.fields import show
from ome_routing.core.report import format_rfc3339, parse_rfc3339
from ome_routing.core.weights import MILLI, normalize

#: The InferenceService annotation that sets (and wins over) the chart's value.
MAX_INCREASE_ANNOTATION = "routing.ome-routing.io/max-increase-per-period"
#: The TrafficMap annotation that shows each home's target and ramped weight.
RAMP_ANNOTATION = "routing.ome-routing.io/ramp"
#: the longest ramp annotation read (ours holds a few hundred bytes a home); longer is no state
MAX_STATE_BYTES = 64 * 1024
#: The chart's value, as the controller's config spells it.
CHART_FIELD = "routing.ramp.maxIncreasePerPeriod"
RAMP_FIELDS: tuple[str, ...] = ("maxIncreasePerPeriod",)
#: The step period of a service that neither polls nor probes: the chart's example poll.
DEFAULT_PERIOD = Duration.parse("10s")

_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_MAX_TEXT = 32


class RampSettingError(ValueError):
    """A `maxIncreasePerPeriod` that is not a decimal in (0, 1]; the message names it."""


@dataclass(frozen=True, slots=True)
class MaxIncrease:
    """A validated `maxIncreasePerPeriod`: the fraction, and its text as written."""

    fraction: Fraction
    text: str

    @property
    def steps(self) -> int:
        """Steps from 0 to the target: ceil(1/f)."""
        return math.ceil(1 / self.fraction)


def parse_max_increase(value: object, field: str) -> MaxIncrease | None:
    """`maxIncreasePerPeriod` as written (a string, or a YAML number); None or "" is off.

    Raises `RampSettingError`: `<field> ("<value>") must be a decimal fraction in (0, 1],
    such as "0.25"`.
    """
    if value is None or value == "":
        return None
    text = value if isinstance(value, str) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = repr(value) if isinstance(value, float) else str(value)
    if text is not None and len(text) <= _MAX_TEXT and _DECIMAL.fullmatch(text):
        fraction = Fraction(text)
        if 0 < fraction <= 1:
            return MaxIncrease(fraction, text)
    raise RampSettingError(
        f'{field} ({show(value)}) must be a decimal fraction in (0, 1], such as "0.25"'
    )


def load_ramp(block: object) -> MaxIncrease | None:
    """The chart's `routing.ramp` block (None or {} is off); raises `RampSettingError`."""
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise RampSettingError(f"routing.ramp must be a mapping of fields, got {show(block)}")
    return parse_max_increase(block.get("maxIncreasePerPeriod"), CHART_FIELD)


# --- the arithmetic --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One home as OME weighs it: its weight, and its capacity (OME's raw weight)."""

    cluster: str
    weight: int
    #: routable replicas times the factor in thousandths (`core.weights.raw_weight`)
    capacity: int

    @property
    def effective(self) -> int:
        """The capacity the ramp aims at: 0 where OME gives the home weight 0."""
        return self.capacity if self.weight > 0 else 0


@dataclass(frozen=True, slots=True)
class Ramped:
    """One evaluation, in the targets' order."""

    weights: tuple[int, ...]
    #: the ramped capacities, in thousandths of a replica (as `Target.capacity`)
    ramped: tuple[Fraction, ...]
    #: per home: the steps still needed to reach its capacity (0 once there)
    periods_left: tuple[int, ...]
    #: some home rose in this evaluation
    stepped: bool

    @property
    def in_progress(self) -> bool:
        return any(self.periods_left)


def ramp(
    targets: Sequence[Target],
    before: Mapping[str, Fraction],
    fraction: Fraction,
    *,
    step: bool = True,
) -> Ramped:
    """The weights to publish after one evaluation; `before` is cluster -> ramped capacity.

    With `step` False no home rises (between two steps); falls, gates and removals still
    apply.
    """
    rise = fraction if step else Fraction(0)
    aims = [t.effective for t in targets]
    previous = [before.get(t.cluster, Fraction(0)) for t in targets]
    if any(min(Fraction(aim), r) for aim, r in zip(aims, previous, strict=True)):
        ramped = [min(Fraction(aim), r + rise * aim) for aim, r in zip(aims, previous, strict=True)]
    else:  # nobody serves (a new map, or every serving home gone): nobody else could
        ramped = [Fraction(aim) for aim in aims]
    stepped = any(r > p for r, p in zip(ramped, previous, strict=True))
    left = tuple(
        math.ceil((aim - r) / (fraction * aim)) if r < aim else 0
        for aim, r in zip(aims, ramped, strict=True)
    )
    if not any(left):
        weights = tuple(t.weight for t in targets)
    else:
        denominator = math.lcm(*(r.denominator for r in ramped))
        weights = tuple(normalize([int(r * denominator) for r in ramped]))
    return Ramped(weights, tuple(ramped), left, stepped)


def starting_point(targets: Sequence[Target], published: Mapping[str, int]) -> dict[str, Fraction]:
    """The ramped capacities of a map without ramp state: its capacity for a home the map
    serves (weight > 0), 0 for one it does not (a new or recovering home)."""
    return {
        t.cluster: Fraction(t.effective if published.get(t.cluster, 0) > 0 else 0) for t in targets
    }


# --- one evaluation, with the period and the map's annotation --------------------------


@dataclass(frozen=True, slots=True)
class HomeRamp:
    target: int
    weight: int
    #: capacity and ramped capacity, in thousandths of a replica
    capacity: Fraction
    ramped: Fraction
    periods_left: int


@dataclass(frozen=True, slots=True)
class RampState:
    """What the map's `routing.ome-routing.io/ramp` annotation says."""

    max_increase: str
    period: Duration
    #: when a home last rose; None before the first step
    stepped_at: datetime | None
    homes: Mapping[str, HomeRamp]

    @property
    def in_progress(self) -> bool:
        return any(h.periods_left for h in self.homes.values())


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The weights to publish (targets' order), the annotation, and when to look again."""

    weights: tuple[int, ...]
    state: RampState
    #: until the next step, while a home is still rising; None when none is
    requeue_after: timedelta | None


def evaluate(
    targets: Sequence[Target],
    published: Mapping[str, int],
    previous: RampState | None,
    setting: MaxIncrease,
    period: Duration,
    now: datetime,
) -> Evaluation:
    """One evaluation: a step when none is under way or a period has passed since the last.

    `published` is cluster -> weight as the map holds it now; `previous` the map's
    annotation (None without one). A home that starts rising while no other is takes its
    first step at once; the next steps come a period apart.
    """
    due = (
        previous is None
        or not previous.in_progress
        or previous.stepped_at is None
        or now >= previous.stepped_at + period.ceil_timedelta()
    )
    before = starting_point(targets, published)
    if previous is not None:
        before |= {
            t.cluster: previous.homes[t.cluster].ramped
            for t in targets
            if t.cluster in previous.homes
        }
    ramped = ramp(targets, before, setting.fraction, step=due)
    stepped_at = now if ramped.stepped else (previous.stepped_at if previous else None)
    homes = {
        t.cluster: HomeRamp(t.weight, weight, Fraction(t.effective), r, left)
        for t, weight, r, left in zip(
            targets, ramped.weights, ramped.ramped, ramped.periods_left, strict=True
        )
    }
    state = RampState(setting.text, period, stepped_at, homes)
    requeue = None
    if ramped.in_progress:
        start = stepped_at if stepped_at is not None else now
        requeue = max(timedelta(0), start + period.ceil_timedelta() - now)
    return Evaluation(ramped.weights, state, requeue)


def state_to_annotation(state: RampState) -> str:
    """The annotation's value: compact JSON, homes sorted by cluster, capacities in
    replicas as decimal text."""
    document: dict[str, Any] = {
        "maxIncreasePerPeriod": state.max_increase,
        "period": str(state.period),
    }
    if state.stepped_at is not None:
        document["steppedAt"] = format_rfc3339(state.stepped_at)
    document["homes"] = {
        cluster: {
            "target": home.target,
            "weight": home.weight,
            "capacity": replicas_text(home.capacity),
            "ramped": replicas_text(home.ramped),
            "periodsLeft": home.periods_left,
        }
        for cluster, home in sorted(state.homes.items())
    }
    return json.dumps(document, separators=(",", ":"))


def state_from_annotation(text: str | None) -> RampState | None:
    """The annotation as written by `state_to_annotation`; None when absent or unreadable
    (someone edited it): the ramp then goes on from the map's weights alone."""
    if not text or len(text) > MAX_STATE_BYTES:
        return None
    try:
        document = json.loads(text)
        stamp = document.get("steppedAt")
        homes = {
            str(cluster): HomeRamp(
                int(home["target"]),
                int(home["weight"]),
                _replicas(home["capacity"]),
                _replicas(home["ramped"]),
                int(home["periodsLeft"]),
            )
            for cluster, home in document["homes"].items()
        }
        return RampState(
            str(document["maxIncreasePerPeriod"]),
            Duration.parse(str(document["period"])),
            parse_rfc3339(stamp) if stamp is not None else None,
            homes,
        )
    except (ValueError, TypeError, KeyError, AttributeError, ZeroDivisionError, RecursionError):
        return None


def replicas_text(milli: Fraction) -> str:
    """Thousandths of a replica as decimal replicas: `2`, `0.5`, `1.875`.

    A ramped capacity is a sum of decimal fractions of whole thousandths, so it always
    has a finite decimal form; anything else is shown to 12 places (never reached).
    """
    value = milli / MILLI
    places = 0
    while (value * 10**places).denominator != 1 and places < 12:
        places += 1
    whole = math.floor(value * 10**places)
    if places == 0:
        return str(whole)
    text = f"{whole // 10**places}.{whole % 10**places:0{places}d}".rstrip("0")
    return text.rstrip(".")


def _replicas(text: object) -> Fraction:
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text):
        raise ValueError(f"not a decimal: {text!r}")
    return Fraction(text) * MILLI
