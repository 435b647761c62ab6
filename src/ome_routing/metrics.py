"""Prometheus metrics of the routing controller.

Each controller owns one `RoutingMetrics` with its own registry, so that several can run in
one process (tests) without sharing series. Names follow OME where OME names them
(`ome_trafficmap_capacity_fallback_homes`); the rest are prefixed `ome_routing_`.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0)


class RoutingMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.fallback_homes = Gauge(
            "ome_trafficmap_capacity_fallback_homes",
            "Homes of a TrafficMap without a capacity ceiling, while its capacity poll is on.",
            ["namespace", "trafficmap"],
            registry=self.registry,
        )
        self.polls = Counter(
            "ome_routing_capacity_polls_total",
            "Capacity polls by outcome (ok, or the family of the fallback reason).",
            ["outcome"],
            registry=self.registry,
        )
        self.poll_duration = Histogram(
            "ome_routing_capacity_poll_duration_seconds",
            "Time from sending a capacity poll to its result.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.budget_wait = Histogram(
            "ome_routing_observer_budget_wait_seconds",
            "Time a poll or probe waited for a slot of routing.observer.maxConcurrentRequests.",
            ["kind"],
            buckets=_WAIT_BUCKETS,
            registry=self.registry,
        )
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
        self.probes = Counter(
            "ome_routing_health_probes_total",
            "Health probes by result (Passing, Failing, Unknown).",
            ["result"],
            registry=self.registry,
        )
        self.gated_homes = Gauge(
            "ome_trafficmap_probe_gated_homes",
            "Homes of a TrafficMap that its health probe gates, while its probe is on.",
            ["namespace", "trafficmap"],
            registry=self.registry,
        )
        self.publication_fallback = Gauge(
            "ome_trafficmap_publication_fallback",
            "1 while a TrafficMap's PublicationFallback condition is True (never, for the "
            "built-in gatewayapi publisher).",
            ["namespace", "trafficmap", "publisher"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "ome_routing_leader",
            "1 while this replica holds the leader Lease.",
            registry=self.registry,
        )

    def set_fallback_homes(self, namespace: str, name: str, count: int | None) -> None:
        """Set the gauge for one map; None (poll off, or map gone) removes its series."""
        if count is None:
            with contextlib.suppress(KeyError):
                self.fallback_homes.remove(namespace, name)
        else:
            self.fallback_homes.labels(namespace=namespace, trafficmap=name).set(count)

    def set_gated_homes(self, namespace: str, name: str, count: int | None) -> None:
        """Set the gated-homes gauge for one map; None (probe off) removes its series."""
        if count is None:
            with contextlib.suppress(KeyError):
                self.gated_homes.remove(namespace, name)
        else:
            self.gated_homes.labels(namespace=namespace, trafficmap=name).set(count)

    def forget_map(self, namespace: str, name: str) -> None:
        with contextlib.suppress(KeyError):
            self.fallback_homes.remove(namespace, name)
        with contextlib.suppress(KeyError):
            self.gated_homes.remove(namespace, name)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def set_publication_fallback(self, namespace: str, name: str, value: int) -> None:
        self.publication_fallback.labels(
            namespace=namespace, trafficmap=name, publisher="gatewayapi"
        ).set(value)

    def forget_publication(self, namespace: str, name: str) -> None:
        with contextlib.suppress(KeyError):
            self.publication_fallback.remove(namespace, name, "gatewayapi")
