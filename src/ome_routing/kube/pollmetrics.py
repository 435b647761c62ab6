"""The observer's and the prober's stats, fed into the controller's Prometheus metrics.

`PollMetrics` is the `stats` of the controller's `Observer` and `Prober`: each finished
poll counts in `ome_routing_capacity_polls_total` by outcome, its latency and budget wait
in their histograms; each finished probe in `ome_routing_health_probes_total` by result,
with its wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ome_routing.metrics import RoutingMetrics
from ome_routing.observer.failures import Outcome
from ome_routing.observer.prober import ProbeEvent
from ome_routing.observer.stats import PollEvent

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram


class PollMetrics:
    """Feeds finished polls into the Prometheus metrics.

    The series a poll touches are looked up once, here: a `labels()` lookup on every
    poll cost more than the counting itself (about 5 of 9 us a poll).
    """

    def __init__(self, metrics: RoutingMetrics) -> None:
        self._metrics = metrics
        # made at the first poll that needs them, as `labels()` would: a series appears
        # once it has something to say
        self._polls: dict[Outcome, Counter] = {}
        self._capacity_wait: Histogram | None = None

    def poll_finished(self, event: PollEvent) -> None:
        polls = self._polls.get(event.outcome)
        if polls is None:
            polls = self._metrics.polls.labels(outcome=str(event.outcome))
            self._polls[event.outcome] = polls
        polls.inc()
        self._metrics.poll_duration.observe(event.latency)
        wait = self._capacity_wait
        if wait is None:
            wait = self._capacity_wait = self._metrics.budget_wait.labels(kind="capacity")
        wait.observe(event.waited)

    def probe_finished(self, event: ProbeEvent) -> None:
        self._metrics.probes.labels(result=str(event.result)).inc()
        self._metrics.budget_wait.labels(kind="probe").observe(event.waited)
