"""The observer: owns time and I/O for capacity polls and health probes.

It schedules one poll per home, shares the request budget, and hands readings and
failures to the core. It never computes weights.

- `RequestBudget` (budget): the `maxConcurrentRequests` slots polls and probes share,
  fairly by namespace.
- `PollClient`, `build_request`, `request_for_url`, `join_poll_url`, `poll_target`
  (polling): one poll, and its URL as OME builds it (`urls`: Go's `url.Parse`, OME's
  canonical endpoint, Go's `url.JoinPath`); `PollRequest` (request): what they build.
- `Observer` (observer): one window per home; verdict changes. Its schedule and place in
  the budget's line are `dispatch`; what it holds of a home is `homes`; a poll underway is
  `flight`.
- `failures`: the fallback reason families, and `Outcome` for counting polls.
- `tune_gc`, `pace_collections` (tuning): the garbage-collector settings the controller
  applies at startup, and the collections its event loop runs a little and often.
- `eventloop`: the controller's event loop, uvloop's where installed, asyncio's otherwise.
- `transport`: the polls' HTTP/1.1 connections, parsed by llhttp.
"""

from ome_routing.observer.budget import RequestBudget, Slot
from ome_routing.observer.failures import Outcome, PollFailure
from ome_routing.observer.homes import wall_clock
from ome_routing.observer.observer import (
    NoStats,
    Observer,
    PollCounts,
    PollEvent,
    PollStats,
)
from ome_routing.observer.polling import (
    PollClient,
    PollResult,
    build_request,
    join_poll_url,
    poll_target,
    request_for_url,
)
from ome_routing.observer.request import PollRequest
from ome_routing.observer.tuning import pace_collections, tune_gc

__all__ = [
    "NoStats",
    "Observer",
    "Outcome",
    "PollClient",
    "PollCounts",
    "PollEvent",
    "PollFailure",
    "PollRequest",
    "PollResult",
    "PollStats",
    "RequestBudget",
    "Slot",
    "build_request",
    "join_poll_url",
    "pace_collections",
    "poll_target",
    "request_for_url",
    "tune_gc",
    "wall_clock",
]
