"""Finished polls counted in the Prometheus metrics: by outcome, latency and budget wait."""

from __future__ import annotations

from ome_routing.kube.pollmetrics import PollMetrics
from ome_routing.metrics import RoutingMetrics
from ome_routing.observer.failures import Outcome
from ome_routing.observer.stats import PollEvent


def _sample(exposition: str, series: str) -> float:
    for line in exposition.splitlines():
        if line.startswith(series + " "):
            return float(line.split(" ")[1])
    raise AssertionError(f"{series} not in the exposition")


def test_polls_are_counted_by_outcome_with_their_latency_and_wait() -> None:
    metrics = RoutingMetrics()
    stats = PollMetrics(metrics)
    stats.poll_finished(PollEvent("a", Outcome.OK, 1.0, 0.5, 0.002))
    stats.poll_finished(PollEvent("b", Outcome.OK, 1.0, 0.0, 0.004))
    stats.poll_finished(PollEvent("c", Outcome.UNREACHABLE, 2.0, 0.25, 3.0))
    text = metrics.exposition().decode()
    assert _sample(text, 'ome_routing_capacity_polls_total{outcome="ok"}') == 2
    assert (
        _sample(text, f'ome_routing_capacity_polls_total{{outcome="{Outcome.UNREACHABLE}"}}') == 1
    )
    assert _sample(text, "ome_routing_capacity_poll_duration_seconds_count") == 3
    assert _sample(text, "ome_routing_capacity_poll_duration_seconds_sum") == 3.006
    wait = 'ome_routing_observer_budget_wait_seconds_{}{{kind="capacity"}}'
    assert _sample(text, wait.format("count")) == 3
    assert _sample(text, wait.format("sum")) == 0.75


def test_an_outcome_no_poll_had_has_no_series() -> None:
    metrics = RoutingMetrics()
    stats = PollMetrics(metrics)
    text = metrics.exposition().decode()
    assert 'kind="capacity"' not in text
    stats.poll_finished(PollEvent("a", Outcome.OK, 1.0, 0.0, 0.002))
    text = metrics.exposition().decode()
    assert 'outcome="ok"' in text
    assert f'outcome="{Outcome.UNREACHABLE}"' not in text
    assert 'kind="capacity"' in text
