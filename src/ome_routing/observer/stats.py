"""What the observer reports about each poll, for metrics: one record per finished poll.

`PollStats` is what the metrics layer implements; `PollCounts` is a plain one (tests,
benchmarks), `NoStats` none at all.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ome_routing.observer.failures import Outcome


class PollEvent(NamedTuple):
    """One finished poll, for metrics: times are event-loop seconds.

    A named tuple: one is made for every poll, and it is the cheapest immutable record.
    """

    key: Hashable
    outcome: Outcome
    #: when the poll was due and started waiting for a request slot
    started: float
    #: seconds spent waiting for the slot (the request went out at started + waited)
    waited: float
    #: seconds from sending the request to the end of the answer
    latency: float


class PollStats(Protocol):
    """What the observer reports about its polls; the metrics layer implements it."""

    def poll_finished(self, event: PollEvent) -> None: ...


class NoStats:
    def poll_finished(self, event: PollEvent) -> None:
        return None


@dataclass(slots=True)
class PollCounts:
    """A plain `PollStats`: polls by outcome, and total latency and wait."""

    by_outcome: dict[Outcome, int] = field(default_factory=dict)
    latency_seconds: float = 0.0
    waited_seconds: float = 0.0
    longest_wait: float = 0.0

    def poll_finished(self, event: PollEvent) -> None:
        self.by_outcome[event.outcome] = self.by_outcome.get(event.outcome, 0) + 1
        self.latency_seconds += event.latency
        self.waited_seconds += event.waited
        self.longest_wait = max(self.longest_wait, event.waited)

    @property
    def total(self) -> int:
        return sum(self.by_outcome.values())
