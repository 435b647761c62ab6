"""The budget's shares by namespace: held and waiting, a bounded number of series."""

from __future__ import annotations

import re

from ome_routing.kube.controller import flow_counts
from ome_routing.metrics import BUDGET_NAMESPACES, OTHER_NAMESPACES, RoutingMetrics
from ome_routing.observer.budget import RequestBudget

HELD = "ome_routing_observer_budget_held_requests"
WAITING = "ome_routing_observer_budget_waiting_requests"


class Waiting:
    def done(self) -> bool:
        return False

    def set_result(self, result: object, /) -> None:
        return None


def series(metrics: RoutingMetrics, name: str) -> dict[str, float]:
    text = metrics.exposition().decode()
    return {
        namespace: float(value)
        for namespace, value in re.findall(rf'^{name}{{namespace="([^"]*)"}} (\S+)$', text, re.M)
    }


def test_each_namespace_shows_the_slots_it_holds_and_the_requests_it_has_waiting() -> None:
    budget = RequestBudget(4)
    for _ in range(3):
        assert budget.try_acquire("tenant-a")
    assert budget.try_acquire("tenant-b")
    budget.enqueue(Waiting(), "tenant-a")
    budget.enqueue(Waiting(), "tenant-c")
    metrics = RoutingMetrics()
    metrics.budget_shares.watch(lambda: flow_counts(budget))
    assert series(metrics, HELD) == {"tenant-a": 3, "tenant-b": 1, "tenant-c": 0}
    assert series(metrics, WAITING) == {"tenant-a": 1, "tenant-b": 0, "tenant-c": 1}


def test_only_the_busiest_namespaces_are_named_and_the_rest_are_summed() -> None:
    many = BUDGET_NAMESPACES + 5
    budget = RequestBudget(2 * many)
    for i in range(many):  # ns-00 holds 1 slot, ns-01 2, ...: the last are the busiest
        for _ in range(1 if i < many - BUDGET_NAMESPACES else 2):
            budget.try_acquire(f"ns-{i:02}")
    metrics = RoutingMetrics()
    metrics.budget_shares.watch(lambda: flow_counts(budget))
    held = series(metrics, HELD)
    assert len(held) == BUDGET_NAMESPACES + 1
    assert held[OTHER_NAMESPACES] == many - BUDGET_NAMESPACES
    assert all(held[f"ns-{i:02}"] == 2 for i in range(many - BUDGET_NAMESPACES, many))
    assert sum(held.values()) == budget.in_use


def test_no_series_while_no_observer_runs() -> None:
    metrics = RoutingMetrics()
    assert series(metrics, HELD) == {} and series(metrics, WAITING) == {}
    assert f"# TYPE {HELD} gauge" in metrics.exposition().decode()
