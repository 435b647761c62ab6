"""When a count was observed: the `observedAt` the Kubernetes-backed reporter stamps.

Pure: the inputs' freshness and `now` in, a stamp out; no clock of its own.

A figure is stamped with the time of its oldest input, and only while its inputs are live:
- the view of pods and InferenceServices is live while both watches are connected; a
  figure worked out from it is current at `now`;
- with health checks on, a figure is only as fresh as the health round it used: it is
  stamped with that round's start.

While the view is broken, or before any health round has completed, nothing is stamped:
the service keeps its last count with its old stamp, which ages at the controller until
the reading is `maxAge` old and the home loses its ceiling, as OME's guide promises for a
reporter that freezes. A figure that could not be refreshed is never stamped anew.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Count:
    """A service's figure and when it was worked out from a live view."""

    servable: int
    observed_at: datetime


@dataclass(frozen=True)
class Freshness:
    """How current the inputs of a figure are."""

    #: both watches are connected (listed, then watching)
    view_live: bool
    #: whether health checks are on
    health_on: bool = False
    #: the start of the last completed health round, None before the first
    health_round_at: datetime | None = None


def stamp(freshness: Freshness, now: datetime) -> datetime | None:
    """The `observedAt` of a figure worked out now, or None when it can't be refreshed."""
    if not freshness.view_live:
        return None
    if not freshness.health_on:
        return now
    return freshness.health_round_at


def refresh(previous: Count | None, figure: int, observed_at: datetime | None) -> Count | None:
    """The count to serve: the new figure with its stamp, or the last count as it was."""
    if observed_at is None:
        return previous
    if previous is not None and observed_at < previous.observed_at:
        # inputs older than what was already served: nothing newer was learnt
        return previous
    return Count(figure, observed_at)
