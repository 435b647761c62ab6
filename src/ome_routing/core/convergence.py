"""How fast a capacity poll's window follows the reporter: its bounds, from the settings.

A tuning aid (beyond OME, which prints none): `samples`, `quorum`, `period` and
`maxAge` decide how many polls a change of the reported count takes to reach the
ceiling, worked out here for a reporter that stamps each answer when it is polled and
a poll every `period`:

- a drop applies at the `quorum`-th poll that reads it, since the ceiling is the
  `quorum`-th lowest reading; those polls take `quorum` periods;
- a rise applies by the poll that leaves fewer than `quorum` low readings in the window:
  the window keeps `samples` readings, or fewer when `maxAge` ages them out first (a
  reading counts for `ceil(maxAge / period)` polls), so `kept - quorum + 1` polls;
- a reporter that freezes, answering the same `observedAt`, loses the ceiling once that
  stamp is `maxAge` old: every reading carries it, and they expire together;
- after a failed poll, which empties the window, the home keeps its admitted replicas
  until `quorum` polls have succeeded: at least `quorum` periods.

Budget waits stretch the time between polls, never the count of polls; the times given
are those of a steady `period`. Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ome_routing.core.durations import Duration


@dataclass(frozen=True, slots=True)
class Bounds:
    """The poll's convergence bounds, in polls and in time at a steady period."""

    samples: int
    quorum: int
    period: Duration
    max_age: Duration
    #: readings that count at once: `samples`, or fewer when `maxAge` ages them out first
    kept: int
    drop_polls: int
    rise_polls: int

    @property
    def drop_time(self) -> Duration:
        return self.period * self.drop_polls

    @property
    def rise_time(self) -> Duration:
        return self.period * self.rise_polls

    @property
    def fallback_time(self) -> Duration:
        """How long a failed poll leaves the home on its admitted replicas, at the least."""
        return self.period * self.quorum


def bounds(samples: int, quorum: int, period: Duration, max_age: Duration) -> Bounds:
    """The bounds of a poll whose `maxAge` spans at least `quorum` periods (as OME requires)."""
    if not 1 <= quorum <= samples:
        raise ValueError(f"quorum ({quorum}) must be at least 1 and at most samples ({samples})")
    if period.nanoseconds <= 0 or max_age < period * quorum:
        raise ValueError(
            f"maxAge ({max_age}) must span at least quorum ({quorum}) period intervals ({period})"
        )
    within_max_age = -(-max_age.nanoseconds // period.nanoseconds)
    kept = min(samples, within_max_age)
    return Bounds(samples, quorum, period, max_age, kept, quorum, kept - quorum + 1)


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10)
    return f"{number}{suffix or 'th'}"


def describe(found: Bounds) -> list[str]:
    """One line per bound, with the numbers."""
    if found.kept < found.samples:
        kept = f"{found.kept} readings within maxAge {found.max_age}"
    else:
        kept = f"samples {found.samples}"
    return [
        f"a drop in the count applies at the {_ordinal(found.drop_polls)} poll that reads it "
        f"(quorum {found.quorum}): {found.drop_time} at period {found.period}",
        f"a rise in the count applies by the {_ordinal(found.rise_polls)} poll that reads it "
        f"({kept}, minus quorum {found.quorum}, plus 1): {found.rise_time} at period "
        f"{found.period}",
        f"a frozen reporter loses the ceiling within maxAge ({found.max_age}) of its last "
        "observedAt",
        f"a failed poll keeps the admitted replicas for at least quorum ({found.quorum}) polls: "
        f"{found.fallback_time} at period {found.period}",
    ]
