"""The probe metrics: probes by result, and the gated homes of each map."""

from __future__ import annotations

from ome_routing.metrics import RoutingMetrics

GATED = 'ome_routing_probe_gated_homes{namespace="qwen3-0-6b",trafficmap="qwen3-0-6b"}'
FALLBACK = 'ome_trafficmap_capacity_fallback_homes{namespace="qwen3-0-6b",trafficmap="qwen3-0-6b"}'


def test_the_gauge_counts_gated_homes_per_map() -> None:
    metrics = RoutingMetrics()
    metrics.set_gated_homes("qwen3-0-6b", "qwen3-0-6b", 1)
    assert f"{GATED} 1.0" in metrics.exposition().decode()


def test_the_gated_series_goes_with_the_probe_and_with_the_map() -> None:
    metrics = RoutingMetrics()
    metrics.set_gated_homes("qwen3-0-6b", "qwen3-0-6b", 2)
    metrics.set_fallback_homes("qwen3-0-6b", "qwen3-0-6b", 0)
    metrics.set_gated_homes("qwen3-0-6b", "qwen3-0-6b", None)
    text = metrics.exposition().decode()
    assert GATED not in text and f"{FALLBACK} 0.0" in text
    metrics.set_gated_homes("qwen3-0-6b", "qwen3-0-6b", 1)
    metrics.forget_map("qwen3-0-6b", "qwen3-0-6b")
    assert GATED not in metrics.exposition().decode()


def test_turning_the_poll_off_keeps_the_gated_series() -> None:
    metrics = RoutingMetrics()
    metrics.set_gated_homes("qwen3-0-6b", "qwen3-0-6b", 1)
    metrics.set_fallback_homes("qwen3-0-6b", "qwen3-0-6b", None)
    assert f"{GATED} 1.0" in metrics.exposition().decode()


def test_probes_are_counted_by_result() -> None:
    metrics = RoutingMetrics()
    metrics.probes.labels(result="Failing").inc()
    assert 'ome_routing_health_probes_total{result="Failing"} 1.0' in (
        metrics.exposition().decode()
    )
