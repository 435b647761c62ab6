"""Prometheus metrics of the Kubernetes-backed reporter, served at its `/metrics`.

- `ome_routing_reporter_reports_total{namespace,inferenceservice}`: reports served;
- `ome_routing_reporter_servable{namespace,inferenceservice}`: the count last served;
- `ome_routing_reporter_health_checks_total{result}`: health checks by result
  (`passed`, `failed`, `unreachable`);
- `ome_routing_reporter_count_age_seconds{namespace,inferenceservice}`: how old each
  service's count is now (now minus its `observedAt`), worked out at each scrape; it grows
  while the view is broken or the health checks can't run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ome_routing.reporter.counting import ServiceKey
from ome_routing.reporter.healthchecks import CheckResult
from ome_routing.reporter.stamping import Count


class _Ages(Collector):
    def __init__(
        self, counts: Callable[[], Mapping[ServiceKey, Count]], clock: Callable[[], datetime]
    ) -> None:
        self._counts = counts
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "ome_routing_reporter_count_age_seconds",
            "How old each service's count is: now minus the observedAt it is served with.",
            labels=["namespace", "inferenceservice"],
        )
        now = self._clock()
        for (namespace, name), count in sorted(self._counts().items()):
            age = (now - count.observed_at).total_seconds()
            family.add_metric([namespace, name], age)
        yield family


class ReporterMetrics:
    def __init__(
        self, counts: Callable[[], Mapping[ServiceKey, Count]], clock: Callable[[], datetime]
    ) -> None:
        self.registry = CollectorRegistry()
        self.reports = Counter(
            "ome_routing_reporter_reports_total",
            "Capacity reports served, by service.",
            ["namespace", "inferenceservice"],
            registry=self.registry,
        )
        self.servable = Gauge(
            "ome_routing_reporter_servable",
            "The servable count last served, by service.",
            ["namespace", "inferenceservice"],
            registry=self.registry,
        )
        self.health_checks = Counter(
            "ome_routing_reporter_health_checks_total",
            "Health checks of model servers, by result.",
            ["result"],
            registry=self.registry,
        )
        for result in CheckResult:
            self.health_checks.labels(result.value)
        self.registry.register(_Ages(counts, clock))

    def served(self, key: ServiceKey, count: Count) -> None:
        self.reports.labels(*key).inc()
        self.servable.labels(*key).set(count.servable)

    def checked(self, result: CheckResult) -> None:
        self.health_checks.labels(result.value).inc()

    def forget(self, key: ServiceKey) -> None:
        for metric in (self.reports, self.servable):
            with contextlib.suppress(KeyError):
                metric.remove(*key)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
