"""Prometheus metrics of the routing controller.

Each controller owns one `RoutingMetrics` with its own registry, so that several can run in
one process (tests) without sharing series. The series of one TrafficMap each (`PerMapGauge`)
are values in a dict, written out at each scrape: a labelled `Gauge` keeps an object with
its own locks per series, about 700 bytes, for every map of the fleet. Names follow OME where OME names them
(`ome_trafficmap_capacity_fallback_homes`); the rest are prefixed `ome_routing_`. The series
that every poll and probe moves count in plain numbers (`LoopCounter`, `LoopHistogram`):
the library's locks, one per value, cost more than the rest of the count, and only the
event loop's thread counts them. They rest on the library's hooks for its own metric
classes, so they live in `prometheus_adapter`, and `tests/unit/test_loop_metrics.py`
checks that what they write out is what the library's `Counter` and `Histogram` write out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ome_routing.prometheus_adapter import LoopCounter, LoopHistogram

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0)


class PerMapGauge(Collector):
    """A gauge with one series per TrafficMap, held as label values -> value."""

    def __init__(
        self, name: str, documentation: str, labels: list[str], registry: CollectorRegistry
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labels = labels
        self._values: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def set(self, labels: tuple[str, ...], value: float) -> None:
        self._values[labels] = float(value)

    def remove(self, labels: tuple[str, ...]) -> None:
        self._values.pop(labels, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._documentation, labels=self._labels)
        for labels, value in list(self._values.items()):
            family.add_metric(list(labels), value)
        yield family


#: The namespaces that the budget's series name, at most: the busiest (most slots held and
#: requests waiting) at each scrape; the others are summed under `OTHER_NAMESPACES`.
BUDGET_NAMESPACES = 20
#: The label value of the namespaces summed together: not a namespace name (a namespace
#: is a DNS label, with no `_`), so it is never one tenant's.
OTHER_NAMESPACES = "_other"

#: namespace, slots held, requests waiting: what the budget holds of each flow now
FlowCounts = Callable[[], Iterable[tuple[str, int, int]]]


class BudgetShares(Collector):
    """Slots held and requests waiting in the shared budget, by namespace, at each scrape.

    At most `BUDGET_NAMESPACES` namespaces are named (the busiest now), plus one series
    for the rest summed, so that a fleet of thousands of namespaces makes a few dozen
    series. Read from the budget of the running observer (`watch`); none while none runs.
    """

    def __init__(self, registry: CollectorRegistry, limit: int = BUDGET_NAMESPACES) -> None:
        self._limit = limit
        self._source: FlowCounts | None = None
        registry.register(self)

    def watch(self, source: FlowCounts | None) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        held = GaugeMetricFamily(
            "ome_routing_observer_budget_held_requests",
            "Slots of routing.observer.maxConcurrentRequests held now, by the namespace of "
            f"the InferenceService (the {self._limit} busiest; the rest summed as "
            f'namespace="{OTHER_NAMESPACES}").',
            labels=["namespace"],
        )
        waiting = GaugeMetricFamily(
            "ome_routing_observer_budget_waiting_requests",
            "Polls and probes waiting for a slot of routing.observer.maxConcurrentRequests "
            f"now, by the namespace of the InferenceService (the {self._limit} busiest; the "
            f'rest summed as namespace="{OTHER_NAMESPACES}").',
            labels=["namespace"],
        )
        source = self._source
        if source is not None:
            flows = sorted(source(), key=lambda flow: (-(flow[1] + flow[2]), flow[0]))
            for namespace, held_now, waiting_now in flows[: self._limit]:
                held.add_metric([namespace], held_now)
                waiting.add_metric([namespace], waiting_now)
            rest = flows[self._limit :]
            if rest:
                held.add_metric([OTHER_NAMESPACES], sum(flow[1] for flow in rest))
                waiting.add_metric([OTHER_NAMESPACES], sum(flow[2] for flow in rest))
        yield held
        yield waiting


class ShadowDivergence(Collector):
    """Not OME's: homes whose shadow share differs from the live one, by namespace.

    Held per map (set at each reconcile of a service with a shadow, removed when it has
    none), written out summed by namespace: the `BUDGET_NAMESPACES` namespaces with the
    most divergent homes, the rest summed as `OTHER_NAMESPACES`. No series without a
    shadow.
    """

    def __init__(self, registry: CollectorRegistry, limit: int = BUDGET_NAMESPACES) -> None:
        self._limit = limit
        self._values: dict[tuple[str, str], int] = {}
        registry.register(self)

    def set(self, namespace: str, name: str, divergent: int) -> None:
        self._values[(namespace, name)] = divergent

    def remove(self, namespace: str, name: str) -> None:
        self._values.pop((namespace, name), None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "ome_routing_shadow_divergent_homes",
            "Homes whose share under the shadow routing policy differs from the live one, "
            f"by the namespace of the InferenceService (the {self._limit} namespaces with "
            f'the most; the rest summed as namespace="{OTHER_NAMESPACES}").',
            labels=["namespace"],
        )
        totals: dict[str, int] = {}
        for (namespace, _name), divergent in list(self._values.items()):
            totals[namespace] = totals.get(namespace, 0) + divergent
        ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
        for namespace, divergent in ranked[: self._limit]:
            family.add_metric([namespace], divergent)
        rest = ranked[self._limit :]
        if rest:
            family.add_metric([OTHER_NAMESPACES], sum(item[1] for item in rest))
        yield family


class RoutingMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.fallback_homes = PerMapGauge(
            "ome_trafficmap_capacity_fallback_homes",
            "Number of homes currently using control-plane allocation because configured "
            "endpoint capacity did not produce a usable ceiling.",
            ["namespace", "trafficmap"],
            self.registry,
        )
        self.polls = LoopCounter(
            "ome_routing_capacity_polls_total",
            "Capacity polls by outcome (ok, or the family of the fallback reason).",
            ["outcome"],
            registry=self.registry,
        )
        self.poll_duration = LoopHistogram(
            "ome_routing_capacity_poll_duration_seconds",
            "Time from sending a capacity poll to its result.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.budget_wait = LoopHistogram(
            "ome_routing_observer_budget_wait_seconds",
            "Time a poll or probe waited for a slot of routing.observer.maxConcurrentRequests.",
            ["kind"],
            buckets=_WAIT_BUCKETS,
            registry=self.registry,
        )
        self.budget_shares = BudgetShares(self.registry)
        self.reconciles = Counter(
            "ome_routing_trafficmap_reconciles_total",
            "TrafficMap reconciles by result (ok, frozen, skipped, error).",
            ["result"],
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "ome_routing_trafficmap_reconcile_duration_seconds",
            "Time to reconcile one TrafficMap.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.writes = Counter(
            "ome_routing_trafficmap_writes_total",
            "Writes to the API server by kind (create, spec, status, delete).",
            ["kind"],
            registry=self.registry,
        )
        self.homes = Gauge(
            "ome_routing_observed_homes",
            "Homes whose capacity the observer is polling.",
            registry=self.registry,
        )
        self.probes = LoopCounter(
            "ome_routing_health_probes_total",
            "Health probes by result (Passing, Failing, Unknown).",
            ["result"],
            registry=self.registry,
        )
        self.gated_homes = PerMapGauge(
            "ome_routing_probe_gated_homes",
            "Homes of a TrafficMap that its health probe gates, while its probe is on.",
            ["namespace", "trafficmap"],
            self.registry,
        )
        self.publication_fallback = PerMapGauge(
            "ome_trafficmap_publication_fallback",
            "Whether a TrafficMap publisher is currently serving a retained positive "
            "publication plan.",
            ["namespace", "trafficmap", "publisher"],
            self.registry,
        )
        self.shadow_divergence = ShadowDivergence(self.registry)
        self.leader = Gauge(
            "ome_routing_leader",
            "1 while this replica holds the leader Lease (always 0 with --sharding: no leader).",
            registry=self.registry,
        )
        # sharding (ours, `--sharding`): coverage of the shard Leases as this replica sees it
        self.shards_held = Gauge(
            "ome_routing_shards_held",
            "Shards whose Lease this replica holds.",
            registry=self.registry,
        )
        self.shards_unowned = Gauge(
            "ome_routing_shards_unowned",
            "Shards this replica sees with no live holder.",
            registry=self.registry,
        )
        self.shard_members = Gauge(
            "ome_routing_shard_members",
            "Live members of the shard group this replica sees (itself included).",
            registry=self.registry,
        )
        self.shard_transitions = Counter(
            "ome_routing_shard_transitions_total",
            "Shard tenures of this replica begun or ended, by reason "
            "(acquired, handed_over, lost, released).",
            ["reason"],
            registry=self.registry,
        )

    def set_fallback_homes(self, namespace: str, name: str, count: int | None) -> None:
        """Set the gauge for one map; None (poll off, or map gone) removes its series."""
        if count is None:
            self.fallback_homes.remove((namespace, name))
        else:
            self.fallback_homes.set((namespace, name), count)

    def set_gated_homes(self, namespace: str, name: str, count: int | None) -> None:
        """Set the gated-homes gauge for one map; None (probe off) removes its series."""
        if count is None:
            self.gated_homes.remove((namespace, name))
        else:
            self.gated_homes.set((namespace, name), count)

    def forget_map(self, namespace: str, name: str) -> None:
        self.fallback_homes.remove((namespace, name))
        self.gated_homes.remove((namespace, name))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def set_publication_fallback(self, namespace: str, name: str, value: int) -> None:
        self.publication_fallback.set((namespace, name, "gatewayapi"), value)

    def forget_publication(self, namespace: str, name: str) -> None:
        self.publication_fallback.remove((namespace, name, "gatewayapi"))
