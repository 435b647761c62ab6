"""The shadow's metric (bounded labels) and `kubectl ome traffic diff`'s pure report."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from ome_routing.kubectl.shadow_diff import diff_report, diff_table
from ome_routing.metrics import ShadowDivergence


def samples(registry: CollectorRegistry) -> dict[str, float]:
    return {
        sample.labels["namespace"]: sample.value
        for family in registry.collect()
        if family.name == "ome_routing_shadow_divergent_homes"
        for sample in family.samples
    }


class TestTheDivergenceMetric:
    def test_no_series_without_a_shadow(self) -> None:
        registry = CollectorRegistry()
        ShadowDivergence(registry)
        assert samples(registry) == {}

    def test_maps_sum_by_namespace_and_go_with_their_shadow(self) -> None:
        registry = CollectorRegistry()
        gauge = ShadowDivergence(registry)
        gauge.set("team-a", "chat", 2)
        gauge.set("team-a", "code", 1)
        gauge.set("team-b", "chat", 0)
        assert samples(registry) == {"team-a": 3, "team-b": 0}
        gauge.remove("team-a", "chat")
        assert samples(registry) == {"team-a": 1, "team-b": 0}

    def test_at_most_the_limit_of_namespaces_is_named_and_the_rest_summed(self) -> None:
        registry = CollectorRegistry()
        gauge = ShadowDivergence(registry, limit=2)
        for index, divergent in enumerate((5, 1, 3, 2)):
            gauge.set(f"ns-{index}", "svc", divergent)
        assert samples(registry) == {"ns-0": 5, "ns-2": 3, "_other": 3}


def a_map(*entries: tuple[str, int, int | None, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat", "namespace": "prod"},
        "spec": {
            "entries": [
                {
                    "cluster": cluster,
                    "weight": weight,
                    "capacity": {"source": source}
                    | ({"reported": reported} if reported is not None else {}),
                }
                for cluster, weight, reported, source in entries
            ]
        },
    }


def a_shadow(*entries: tuple[str, int, int | None, str], **extra: Any) -> dict[str, Any]:
    status = {"entries": a_map(*entries)["spec"]["entries"]}
    status |= extra
    return {"status": status}


class TestTheDiffReport:
    def test_live_beside_shadow_with_the_reason(self) -> None:
        report = diff_report(
            a_map(("worker-a", 1, 4, "ControlPlane"), ("worker-b", 1, 4, "ControlPlane")),
            a_shadow(
                ("worker-a", 4, 4, "ControlPlane"),
                ("worker-b", 1, 1, "Endpoint"),
                source="routing.shadow",
                homes=[
                    {"cluster": "worker-a", "reason": "the other homes' weights differ"},
                    {"cluster": "worker-b", "reason": "live ceiling 4, shadow ceiling 1"},
                ],
                notEvaluated=[{"field": "capacity.period", "reason": "not evaluated"}],
            ),
        )
        assert report["divergentHomes"] == 2
        assert diff_table(report) == (
            "CLUSTER    LIVE WEIGHT   LIVE SHARE   LIVE CEILING     SHADOW WEIGHT   "
            "SHADOW SHARE   SHADOW CEILING   REASON\n"
            "worker-a   1             50.0%        ControlPlane 4   4               "
            "80.0%          ControlPlane 4   the other homes' weights differ\n"
            "worker-b   1             50.0%        ControlPlane 4   1               "
            "20.0%          Endpoint 1       live ceiling 4, shadow ceiling 1\n"
            "\n"
            "Shadow from routing.shadow: 2 home(s) diverge.\n"
            "capacity.period: not evaluated\n"
        )

    def test_a_home_in_one_table_only_and_a_table_of_zero_weights(self) -> None:
        report = diff_report(
            a_map(("worker-a", 0, None, "ControlPlane")),
            a_shadow(),
        )
        assert report["homes"] == [
            {
                "cluster": "worker-a",
                "liveWeight": 0,
                "liveShare": "0.0%",
                "liveCeiling": "ControlPlane",
                "shadowWeight": 0,
                "shadowShare": "0.0%",
                "shadowCeiling": "-",
                "reason": "",
            }
        ]
