"""The journal of weight changes: which homes of a TrafficMap changed, and why, in words.

Not OME's (OME's routing controller records no Events): an opt-in addition
(`routing.journal.enabled`). `changes` compares a map's entries before and after one
write (both as the API server stores them, `spec.entries`) and returns one `Change` per
home whose weight, ceiling or its source, probe gate or drain changed, with a text per
cause, for example::

    worker-b weight 2 -> 1: ceiling 3 -> 1 after 3 readings of 1 (quorum 3)

What the entries cannot say comes from the reconciler as `Evidence`: the fresh
readings of the home's window and its quorum (so the words can say what set the
ceiling), and whether the accepted placement plan drains the home.

The causes, each with its Event reason and one text (`CAUSE_TEXTS` lists them):

- `HomeAdded`, `HomeRemoved`: the home appeared in or left the table;
- `CeilingChanged`: the reported ceiling moved, appeared or went (`CapacityFallback`,
  a Warning, when it went: the entry's fallback reason verbatim);
- `CapacitySourceChanged`: `capacity.source` changed with the ceiling unchanged;
- `ReadyChanged`, `AllocatedChanged`, `FactorChanged`: the other inputs of the weight;
- `ProbeGated` (a Warning), `ProbeGateOpened`: the probe's gate;
- `Drained`, `Undrained`: traffic-drain overrides (`drainRefs`) or the placement plan;
- `RampStep`, `RampDone`: a ramp (`core.ramps`, ours) holds the home below its target
  weight, or has just brought it there: added after the causes above, or alone when the
  weight moved for the ramp only;
- `Rebalanced`: the weight changed with none of the above, because other homes did
  (weights are reduced by their GCD together).

Pure: no clock, no I/O; entries are the raw JSON of `spec.entries`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from ome_routing.core.capacity import Window

NORMAL = "Normal"
WARNING = "Warning"

#: The journal's Events: who writes them (a qualified name, as the API requires), the
#: action, and the annotations that carry the home and both weights.
REPORTING_CONTROLLER = "routing.ome-routing.io/placement-routing"
ACTION = "UpdateWeight"
ANNOTATION_HOME = "routing.ome-routing.io/home"
ANNOTATION_PREVIOUS = "routing.ome-routing.io/previous-weight"
ANNOTATION_WEIGHT = "routing.ome-routing.io/weight"


class Cause(StrEnum):
    """Why a home's entry changed; the value is the Event's `reason`."""

    HOME_ADDED = "HomeAdded"
    HOME_REMOVED = "HomeRemoved"
    CEILING_CHANGED = "CeilingChanged"
    CAPACITY_FALLBACK = "CapacityFallback"
    CAPACITY_SOURCE_CHANGED = "CapacitySourceChanged"
    READY_CHANGED = "ReadyChanged"
    ALLOCATED_CHANGED = "AllocatedChanged"
    FACTOR_CHANGED = "FactorChanged"
    PROBE_GATED = "ProbeGated"
    PROBE_GATE_OPENED = "ProbeGateOpened"
    DRAINED = "Drained"
    UNDRAINED = "Undrained"
    RAMP_STEP = "RampStep"
    RAMP_DONE = "RampDone"
    REBALANCED = "Rebalanced"


#: The causes that are Warnings: traffic taken away by a gate, or a ceiling lost.
WARNINGS = frozenset({Cause.CAPACITY_FALLBACK, Cause.PROBE_GATED})

#: Each cause's text, `{}` where its values go (for the docs and the tests).
CAUSE_TEXTS: dict[Cause, str] = {
    Cause.HOME_ADDED: "home added",
    Cause.HOME_REMOVED: "home removed",
    Cause.CEILING_CHANGED: "ceiling {} -> {}{}",
    Cause.CAPACITY_FALLBACK: "ceiling {} -> none: {}",
    Cause.CAPACITY_SOURCE_CHANGED: "capacity source {} -> {}",
    Cause.READY_CHANGED: "ready {} -> {}",
    Cause.ALLOCATED_CHANGED: "allocated {} -> {}",
    Cause.FACTOR_CHANGED: "factor {} -> {}",
    Cause.PROBE_GATED: "probe gate closed: {}",
    Cause.PROBE_GATE_OPENED: "probe gate opened",
    Cause.DRAINED: "drained by {}",
    Cause.UNDRAINED: "no longer drained by {}",
    Cause.RAMP_STEP: "ramping to its target weight {} ({} period(s) left)",
    Cause.RAMP_DONE: "ramp done: at its target weight {}",
    Cause.REBALANCED: "weights rebalanced with the other homes",
}

#: What drains a home when the accepted placement plan asks it to.
PLAN_DRAIN = "the placement plan (drainRequested)"


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the reconciler knows of a home beyond its entry."""

    #: the servable counts of the window's fresh readings (None: polling is off)
    readings: tuple[int, ...] | None = None
    quorum: int | None = None
    #: the accepted placement plan drains the home (`drainRequested`)
    plan_drained: bool = False
    #: a ramp (ours): the home's target weight and the periods its ramp has left, from
    #: the map's `routing.ome-routing.io/ramp` annotation after the write (None: no ramp)
    ramp_target: int | None = None
    ramp_periods_left: int = 0
    #: the annotation before the write had periods left for the home
    ramp_was_running: bool = False


NO_EVIDENCE = Evidence()


@dataclass(frozen=True, slots=True)
class Reason:
    """One cause of a change, and its words."""

    cause: Cause
    text: str


@dataclass(frozen=True, slots=True)
class Change:
    """One home's change: its weight before (None: it was not a home) and after (None:
    it is no longer one), and the causes, most telling first."""

    cluster: str
    previous: int | None
    weight: int | None
    reasons: tuple[Reason, ...] = field(default=())

    @property
    def reason(self) -> Cause:
        """The Event's reason: the first cause."""
        return self.reasons[0].cause

    @property
    def type(self) -> str:
        """`Warning` when any cause took traffic away by a gate or a lost ceiling."""
        return WARNING if any(r.cause in WARNINGS for r in self.reasons) else NORMAL

    @property
    def note(self) -> str:
        """The Event's note: the weight's move, then the causes' words."""
        causes = "; ".join(r.text for r in self.reasons)
        return f"{self.cluster} {_weight_move(self.previous, self.weight)}: {causes}"


def _weight_move(previous: int | None, weight: int | None) -> str:
    if previous == weight:
        return f"weight {weight} (unchanged)"
    return f"weight {_or_none(previous)} -> {_or_none(weight)}"


def _or_none(value: object) -> str:
    return "none" if value is None else str(value)


def changes(
    previous: Sequence[Mapping[str, Any]],
    current: Sequence[Mapping[str, Any]],
    evidence: Mapping[str, Evidence] | None = None,
) -> list[Change]:
    """The homes whose weight, ceiling, capacity source, gate or drain changed, by cluster.

    `evidence` is the reconciler's knowledge of each home now (`NO_EVIDENCE` for a home
    it does not name).
    """
    evidence = evidence or {}
    before = {str(e.get("cluster")): e for e in previous}
    after = {str(e.get("cluster")): e for e in current}
    found: list[Change] = []
    for cluster in sorted(before.keys() | after.keys()):
        old, new = before.get(cluster), after.get(cluster)
        facts = evidence.get(cluster, NO_EVIDENCE)
        if old is None:
            assert new is not None
            found.append(Change(cluster, None, _weight(new), (_reason(Cause.HOME_ADDED),)))
            continue
        if new is None:
            found.append(Change(cluster, _weight(old), None, (_reason(Cause.HOME_REMOVED),)))
            continue
        reasons = _reasons(old, new, facts)
        weight_before, weight_after = _weight(old), _weight(new)
        if facts.ramp_target is not None and (reasons or weight_before != weight_after):
            if facts.ramp_periods_left > 0:
                reasons.append(_reason(Cause.RAMP_STEP, facts.ramp_target, facts.ramp_periods_left))
            elif facts.ramp_was_running:
                reasons.append(_reason(Cause.RAMP_DONE, facts.ramp_target))
        if not reasons and weight_before == weight_after:
            continue
        if not reasons:
            reasons = [_reason(Cause.REBALANCED)]
        found.append(Change(cluster, weight_before, weight_after, tuple(reasons)))
    return found


def _reason(cause: Cause, *values: object) -> Reason:
    return Reason(cause, CAUSE_TEXTS[cause].format(*values))


def _weight(entry: Mapping[str, Any]) -> int:
    return int(entry.get("weight") or 0)


def _capacity(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    capacity = entry.get("capacity")
    return capacity if isinstance(capacity, Mapping) else {}


def _gated(entry: Mapping[str, Any]) -> bool:
    probe = entry.get("probe")
    return isinstance(probe, Mapping) and probe.get("gated") is True


def _probe_message(entry: Mapping[str, Any]) -> str:
    probe = entry.get("probe")
    if not isinstance(probe, Mapping):
        return ""
    failures = int(probe.get("consecutiveFailures") or 0)
    message = str(probe.get("message") or probe.get("result") or "")
    counted = f"{failures} consecutive failure{'s' if failures != 1 else ''}"
    return f"{counted} ({message})" if message else counted


def _reasons(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    facts: Evidence,
) -> list[Reason]:
    """The causes, in the order they explain a weight: gate and drains first (they set
    it to 0 whatever else), then the ceiling, the replicas and the factor."""
    reasons: list[Reason] = []
    if _gated(new) and not _gated(old):
        reasons.append(_reason(Cause.PROBE_GATED, _probe_message(new)))
    elif _gated(old) and not _gated(new):
        reasons.append(_reason(Cause.PROBE_GATE_OPENED))
    old_refs = tuple(old.get("drainRefs") or ())
    new_refs = tuple(new.get("drainRefs") or ())
    added = [ref for ref in new_refs if ref not in old_refs]
    removed = [ref for ref in old_refs if ref not in new_refs]
    if added:
        reasons.append(_reason(Cause.DRAINED, _overrides(added)))
    if removed:
        reasons.append(_reason(Cause.UNDRAINED, _overrides(removed)))
    if facts.plan_drained and _weight(new) == 0 < _weight(old) and not new_refs:
        reasons.append(_reason(Cause.DRAINED, PLAN_DRAIN))
    old_cap, new_cap = _capacity(old), _capacity(new)
    old_ceiling, new_ceiling = old_cap.get("reported"), new_cap.get("reported")
    if new_ceiling is None and old_ceiling is not None:
        reasons.append(
            _reason(Cause.CAPACITY_FALLBACK, old_ceiling, new_cap.get("fallbackReason") or "")
        )
    elif new_ceiling is not None and old_ceiling != new_ceiling:
        reasons.append(
            _reason(
                Cause.CEILING_CHANGED,
                _or_none(old_ceiling),
                new_ceiling,
                _set_by(facts, int(new_ceiling), old_ceiling),
            )
        )
    elif old_cap.get("source") != new_cap.get("source"):
        reasons.append(
            _reason(Cause.CAPACITY_SOURCE_CHANGED, old_cap.get("source"), new_cap.get("source"))
        )
    ceiling_moved = old_ceiling != new_ceiling
    for key, cause in (("ready", Cause.READY_CHANGED), ("allocated", Cause.ALLOCATED_CHANGED)):
        before, after = int(old_cap.get(key) or 0), int(new_cap.get(key) or 0)
        if before == after:
            continue
        if cause is Cause.ALLOCATED_CHANGED and ceiling_moved and _capped(old_cap, new_cap):
            continue  # the ceiling's move says it: allocated is the admitted, capped
        reasons.append(_reason(cause, before, after))
    old_factor, new_factor = old_cap.get("factor"), new_cap.get("factor")
    if old_factor != new_factor:
        reasons.append(_reason(Cause.FACTOR_CHANGED, old_factor or "1", new_factor or "1"))
    return reasons


def _capped(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """A ceiling capped `allocated` before or after (or there is none on one side), so a
    move of the ceiling explains the move of `allocated`."""
    return any(
        cap.get("reported") is None or cap.get("allocated", 0) == cap.get("reported")
        for cap in (old, new)
    )


def _overrides(ids: Sequence[str]) -> str:
    noun = "override" if len(ids) == 1 else "overrides"
    return f"traffic-drain {noun} {', '.join(ids)}"


def _set_by(facts: Evidence, ceiling: int, previous: object) -> str:
    """` after 3 readings of 1 (quorum 3)`; empty when the readings are not known."""
    if facts.readings is None or facts.quorum is None:
        return ""
    return f" after {readings_text(facts.readings, ceiling, previous)} (quorum {facts.quorum})"


def readings_text(readings: Sequence[int], ceiling: int, previous: object) -> str:
    """What set the ceiling, from the window's fresh readings.

    A ceiling that fell or appeared is set by the readings at or below it (`quorum` of
    them at least), one that rose by those at or above it (fewer than `quorum` are
    lower): "3 readings of 1", or "3 readings of 1 or less" when they differ.
    """
    fell = not isinstance(previous, int) or ceiling < previous
    setting = [r for r in readings if (r <= ceiling if fell else r >= ceiling)]
    count = len(setting)
    noun = "reading" if count == 1 else "readings"
    if all(r == ceiling for r in setting):
        return f"{count} {noun} of {ceiling}"
    return f"{count} {noun} of {ceiling} {'or less' if fell else 'or more'}"


def window_evidence(window: Window | None, now: datetime, plan_drained: bool = False) -> Evidence:
    """A home's evidence from its capacity window at `now`: the fresh readings' counts
    (none after a failed poll) and the quorum; without a window, only the plan's drain."""
    if window is None:
        return Evidence(plan_drained=plan_drained)
    readings: tuple[int, ...] = ()
    if window.failure is None:
        cutoff = now - window.settings.max_age_span
        readings = tuple(r.servable for r in window.readings if r.observed_at > cutoff)
    return Evidence(readings, window.settings.quorum, plan_drained)
