"""The fallback-homes gauge: one series per TrafficMap, gone with the map."""

from __future__ import annotations

from ome_routing.metrics import RoutingMetrics

SERIES = 'ome_trafficmap_capacity_fallback_homes{namespace="qwen3-0-6b",trafficmap="qwen3-0-6b"}'


def test_the_gauge_counts_fallback_homes_per_map() -> None:
    metrics = RoutingMetrics()
    metrics.set_fallback_homes("qwen3-0-6b", "qwen3-0-6b", 1)
    assert f"{SERIES} 1.0" in metrics.exposition().decode()


def test_the_series_is_removed_when_the_poll_goes_off_or_the_map_goes() -> None:
    metrics = RoutingMetrics()
    metrics.set_fallback_homes("qwen3-0-6b", "qwen3-0-6b", 2)
    metrics.set_fallback_homes("qwen3-0-6b", "qwen3-0-6b", None)
    assert SERIES not in metrics.exposition().decode()
    metrics.forget_map("qwen3-0-6b", "qwen3-0-6b")  # forgetting twice is harmless


def test_two_controllers_in_one_process_keep_separate_series() -> None:
    first, second = RoutingMetrics(), RoutingMetrics()
    first.set_fallback_homes("a", "a", 3)
    assert 'trafficmap="a"' not in second.exposition().decode()
