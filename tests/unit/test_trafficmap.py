"""TrafficMap entries and conditions, from the spec's examples and the traffic-map reasons."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from tm_builders import a_home, a_map

from ome_routing.core.conditions import Condition, merge_conditions
from ome_routing.core.trafficmap import (
    Entry,
    MapInput,
    PollingState,
    TrafficMapView,
    build_trafficmap,
    entries_to_json,
    entry_to_json,
)
from ome_routing.core.weights import AllFailedPolicy

PRESERVE = AllFailedPolicy.PRESERVE_TRAFFIC
DRAIN = AllFailedPolicy.DRAIN


def capacity_fallback_homes(inp: MapInput) -> int:
    """How many homes have no ceiling while polling is on (0 when it is off), counted
    from the inputs, apart from how `build_trafficmap` counts them."""
    if inp.polling is not PollingState.ON or not inp.placed:
        return 0
    return sum(1 for h in inp.homes if h.capacity is None or h.capacity.ceiling is None)


def jsonpath_line(entry: dict[str, Any]) -> str:
    """What the spec's `kubectl get -o jsonpath` prints for one entry (missing -> empty)."""
    cap = entry["capacity"]
    fields = [
        entry["cluster"],
        entry["weight"],
        cap.get("allocated", ""),
        cap.get("ready", ""),
        cap.get("source", ""),
        cap.get("reported", ""),
    ]
    return " ".join(str(f) for f in fields)


def condition(view: TrafficMapView, type_: str) -> tuple[str, str, str]:
    c = view.condition(type_)
    return c.status, c.reason, c.message


class TestSpecExample:
    def test_worker_a_reports_3_and_worker_b_reports_1(self) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a", admitted=2, reports=3), a_home("worker-b", admitted=2, reports=1)
            )
        )
        lines = [jsonpath_line(e) for e in entries_to_json(view)]
        assert lines == ["worker-a 2 2 2 ControlPlane 3", "worker-b 1 1 2 Endpoint 1"]
        assert condition(view, "CapacityFallback") == (
            "False",
            "EndpointCapacityAvailable",
            "endpoint capacity is available for all 2 home(s)",
        )
        assert view.fallback_homes == 0

    def test_one_home_without_a_ceiling_falls_back(self) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a", reports=3),
                a_home("worker-b", fallback="capacity endpoint returned HTTP 404"),
            )
        )
        assert condition(view, "CapacityFallback") == (
            "True",
            "EndpointCapacityUnavailable",
            "1 of 2 home(s) are using control-plane capacity; "
            "inspect spec.entries[].capacity.fallbackReason",
        )
        entries = entries_to_json(view)
        assert [e["capacity"].get("fallbackReason", "") for e in entries] == [
            "",
            "capacity endpoint returned HTTP 404",
        ]
        assert view.fallback_homes == 1

    def test_a_ceiling_of_zero_takes_all_traffic_even_with_preserve_traffic(self) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a", reports=0, gated=True),
                a_home("worker-b", reports=2, gated=True),
                policy=PRESERVE,
            )
        )
        assert [(e.cluster, e.weight) for e in view.entries] == [("worker-a", 0), ("worker-b", 1)]
        worker_a = entries_to_json(view)[0]["capacity"]
        assert worker_a == {"ready": 2, "source": "Endpoint", "reported": 0}

    def test_a_failed_poll_leaves_the_weight_as_without_a_poll(self) -> None:
        polled = build_trafficmap(
            a_map(
                a_home("worker-a", admitted=4, fallback="no capacity report yet"),
                a_home("worker-b"),
            )
        )
        unpolled = build_trafficmap(
            a_map(
                a_home("worker-a", admitted=4, polled=False),
                a_home("worker-b", polled=False),
                polling=PollingState.NOT_CONFIGURED,
            )
        )
        assert [e.weight for e in polled.entries] == [e.weight for e in unpolled.entries] == [2, 1]


class TestEntries:
    def test_entries_are_sorted_by_cluster(self) -> None:
        view = build_trafficmap(a_map(a_home("worker-c"), a_home("worker-a"), a_home("worker-b")))
        assert [e["cluster"] for e in entries_to_json(view)] == ["worker-a", "worker-b", "worker-c"]

    def test_the_heterogeneous_example_shows_the_factor_in_canonical_form(self) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a", admitted=4, polled=False),
                a_home("worker-b", admitted=2, factor="3", polled=False),
                a_home("worker-c", admitted=2, factor="1.5", polled=False),
                polling=PollingState.NOT_CONFIGURED,
            )
        )
        entries = entries_to_json(view)
        assert [e["capacity"].get("factor", "") for e in entries] == ["", "3", "1500m"]
        assert [e["weight"] for e in entries] == [4, 6, 3]

    def test_zero_counts_are_left_out(self) -> None:
        view = build_trafficmap(a_map(a_home("worker-a", admitted=0, ready=0)))
        assert entry_to_json(view.entries[0])["capacity"] == {
            "source": "ControlPlane",
            "fallbackReason": "no capacity report yet",
        }

    def test_reported_and_fallback_reason_appear_only_while_polling_is_on(self) -> None:
        for polling in (PollingState.DISABLED, PollingState.NOT_CONFIGURED):
            view = build_trafficmap(
                a_map(a_home("worker-a", reports=1), a_home("worker-b"), polling=polling)
            )
            for entry in entries_to_json(view):
                assert entry["capacity"] == {"allocated": 2, "ready": 2, "source": "ControlPlane"}
            assert view.fallback_homes == 0

    def test_a_home_without_a_verdict_while_polling_is_on_has_no_report_yet(self) -> None:
        view = build_trafficmap(a_map(a_home("worker-a", polled=False)))
        assert view.entries[0].capacity.fallback_reason == "no capacity report yet"
        assert view.fallback_homes == 1

    def test_entry_json_has_every_field_the_map_stores(self) -> None:
        view = build_trafficmap(
            a_map(a_home("worker-a", reports=1, factor="500m"), drains={"m-a": "worker-a"})
        )
        assert entry_to_json(view.entries[0]) == {
            "cluster": "worker-a",
            "endpoint": "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com",
            "weight": 0,
            "healthy": True,
            "capacity": {
                "allocated": 1,
                "ready": 2,
                "factor": "500m",
                "source": "Endpoint",
                "reported": 1,
            },
            "drainRefs": ["m-a"],
        }

    def test_an_empty_endpoint_is_left_out_but_weight_and_healthy_are_always_written(
        self,
    ) -> None:
        view = build_trafficmap(a_map(a_home("worker-a", ready=0)))
        entry = entry_to_json(replace(view.entries[0], endpoint=""))
        assert "endpoint" not in entry
        assert (entry["weight"], entry["healthy"]) == (0, False)

    @pytest.mark.parametrize(
        ("ready", "gated", "healthy"), [(2, False, True), (0, False, False), (2, True, False)]
    )
    def test_healthy_means_a_ready_replica_and_no_probe_gate(
        self, ready: int, gated: bool, healthy: bool
    ) -> None:
        view = build_trafficmap(a_map(a_home("worker-a", ready=ready, gated=gated)))
        assert view.entries[0].healthy is healthy

    def test_healthy_ignores_capacity(self) -> None:
        view = build_trafficmap(a_map(a_home("worker-a", reports=0)))
        entry: Entry = view.entries[0]
        assert entry.healthy and entry.weight == 0

    def test_drains_give_zero_list_their_ids_and_the_others_keep_their_ratio(self) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a", admitted=4),
                a_home("worker-b", admitted=2),
                a_home("worker-c", admitted=2),
                drains={"kernel-b": "worker-b", "disk-b": "worker-b", "other": "worker-x"},
            )
        )
        entries = entries_to_json(view)
        assert [(e["cluster"], e["weight"]) for e in entries] == [
            ("worker-a", 2),
            ("worker-b", 0),
            ("worker-c", 1),
        ]
        assert entries[1]["drainRefs"] == ["disk-b", "kernel-b"]
        assert "drainRefs" not in entries[0]

    def test_a_map_that_is_not_placed_has_no_entries(self) -> None:
        view = build_trafficmap(a_map(a_home("worker-a"), placed=False))
        assert view.entries == ()
        assert view.fallback_homes == 0

    def test_two_homes_on_one_cluster_are_refused(self) -> None:
        with pytest.raises(ValueError, match="worker-a"):
            build_trafficmap(a_map(a_home("worker-a"), a_home("worker-a")))


ROUTABLE_CASES = [
    pytest.param(
        a_map(a_home("worker-a"), a_home("worker-b", ready=0)),
        ("True", "Routable", "2 home(s) serving"),
        id="Routable",
    ),
    pytest.param(
        a_map(a_home("worker-a", gated=True), a_home("worker-b", gated=True), policy=PRESERVE),
        (
            "True",
            "AllHomesProbeFailed",
            "2 home(s) have conclusive probe failures; "
            "preserving traffic among homes with ready capacity",
        ),
        id="AllHomesProbeFailed-PreserveTraffic",
    ),
    pytest.param(
        a_map(a_home("worker-a", gated=True), a_home("worker-b", gated=True), policy=DRAIN),
        (
            "False",
            "AllHomesProbeFailed",
            "2 home(s) have conclusive probe failures; all route weights are zero",
        ),
        id="AllHomesProbeFailed-Drain",
    ),
    pytest.param(
        a_map(a_home("worker-a"), placed=False),
        ("False", "NotPlaced", "InferenceService is not Placed; no homes to route to yet"),
        id="NotPlaced",
    ),
    pytest.param(
        a_map(),
        (
            "False",
            "NoAddressableHome",
            "placed, but no admitted home reports an addressable endpoint",
        ),
        id="NoAddressableHome",
    ),
    pytest.param(
        a_map(a_home("worker-a"), a_home("worker-b", ready=0), drains={"m": "worker-a"}),
        ("False", "TrafficDrain", "manual traffic-drain overrides set all 2 route arm(s) to zero"),
        id="TrafficDrain",
    ),
    pytest.param(
        a_map(a_home("worker-a", ready=0), a_home("worker-b", ready=0)),
        (
            "False",
            "AllHomesUnready",
            "2 home(s) addressable but none has ready replicas; all route weights are zero",
        ),
        id="AllHomesUnready",
    ),
    pytest.param(
        a_map(a_home("worker-a", reports=0), a_home("worker-b", admitted=0, ready=1)),
        (
            "False",
            "NoRoutableCapacity",
            "2 home(s) addressable but none has positive routable capacity; "
            "all route weights are zero",
        ),
        id="NoRoutableCapacity",
    ),
]


class TestRoutable:
    @pytest.mark.parametrize(("inp", "expected"), ROUTABLE_CASES)
    def test_every_reason(self, inp: Any, expected: tuple[str, str, str]) -> None:
        assert condition(build_trafficmap(inp), "Routable") == expected

    def test_the_count_is_every_entry_not_only_those_with_weight(self) -> None:
        view = build_trafficmap(
            a_map(a_home("worker-a"), a_home("worker-b", ready=0), a_home("worker-c", reports=0))
        )
        assert condition(view, "Routable") == ("True", "Routable", "3 home(s) serving")

    def test_preserve_traffic_with_every_ceiling_at_zero_is_not_routable(self) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a", gated=True, reports=0),
                a_home("worker-b", gated=True, reports=0),
                policy=PRESERVE,
            )
        )
        assert condition(view, "Routable")[:2] == ("False", "NoRoutableCapacity")

    def test_preserve_traffic_that_drains_hold_is_a_traffic_drain(self) -> None:
        view = build_trafficmap(
            a_map(a_home("worker-a", gated=True), policy=PRESERVE, drains={"m": "worker-a"})
        )
        assert condition(view, "Routable")[:2] == ("False", "TrafficDrain")

    def test_unready_homes_come_before_every_home_gated(self) -> None:
        """OME checks readiness, then routable capacity, before a probe that gates all."""
        view = build_trafficmap(
            a_map(a_home("worker-a", gated=True, ready=0), a_home("worker-b", gated=True, ready=0))
        )
        assert condition(view, "Routable")[:2] == ("False", "AllHomesUnready")

    def test_no_routable_capacity_comes_before_every_home_gated(self) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a", gated=True, reports=0),
                a_home("worker-b", gated=True, reports=0),
                policy=DRAIN,
            )
        )
        assert condition(view, "Routable")[:2] == ("False", "NoRoutableCapacity")

    def test_every_home_gated_without_a_policy_is_all_homes_probe_failed(self) -> None:
        view = build_trafficmap(
            a_map(a_home("worker-a", gated=True), a_home("worker-b", gated=True))
        )
        assert condition(view, "Routable")[:2] == ("False", "AllHomesProbeFailed")

    def test_open_homes_without_capacity_beside_gated_ready_homes_have_no_routable_capacity(
        self,
    ) -> None:
        view = build_trafficmap(a_map(a_home("worker-a", gated=True), a_home("worker-b", ready=0)))
        assert condition(view, "Routable")[:2] == ("False", "NoRoutableCapacity")

    def test_the_not_placed_reason_comes_before_everything_else(self) -> None:
        view = build_trafficmap(
            a_map(a_home("worker-a", ready=0), placed=False, drains={"m": "worker-a"})
        )
        assert condition(view, "Routable")[1] == "NotPlaced"


OVERRIDE_CASES = [
    pytest.param(
        a_map(a_home("worker-a"), a_home("worker-b"), drains={"maintenance-a": "worker-a"}),
        (
            "True",
            "OverridesApplied",
            "1 of 1 traffic-drain annotation override(s) active across 1 route arm(s); "
            "inspect spec.entries[].drainRefs",
        ),
        id="OverridesApplied",
    ),
    pytest.param(
        a_map(a_home("worker-a"), drains={"typo": "wroker-a"}),
        (
            "False",
            "OverridesPending",
            "1 traffic-drain annotation override(s) pending; no matching routable arm",
        ),
        id="OverridesPending",
    ),
    pytest.param(
        a_map(a_home("worker-a")),
        ("False", "NoOverrides", "no traffic-drain annotation override is configured"),
        id="NoOverrides",
    ),
]


class TestOverrideActive:
    @pytest.mark.parametrize(("inp", "expected"), OVERRIDE_CASES)
    def test_every_reason(self, inp: Any, expected: tuple[str, str, str]) -> None:
        assert condition(build_trafficmap(inp), "OverrideActive") == expected

    def test_applied_counts_distinct_ids_of_all_overrides_across_the_arms_they_hold(
        self,
    ) -> None:
        view = build_trafficmap(
            a_map(
                a_home("worker-a"),
                a_home("worker-b"),
                a_home("worker-c"),
                drains={"k-a": "worker-a", "d-a": "worker-a", "m-b": "worker-b", "x": "gone"},
            )
        )
        assert condition(view, "OverrideActive") == (
            "True",
            "OverridesApplied",
            "3 of 4 traffic-drain annotation override(s) active across 2 route arm(s); "
            "inspect spec.entries[].drainRefs",
        )

    def test_drains_of_a_map_that_is_not_placed_are_pending(self) -> None:
        view = build_trafficmap(a_map(a_home("worker-a"), placed=False, drains={"m": "worker-a"}))
        assert condition(view, "OverrideActive")[1] == "OverridesPending"


DISABLED = ("False", "CapacityPollingDisabled", "endpoint capacity polling is disabled")
NO_TARGETS = ("False", "NoCapacityTargets", "no addressable homes require endpoint capacity")

FALLBACK_CASES = [
    pytest.param(
        a_map(a_home("worker-a"), a_home("worker-b"), a_home("worker-c", reports=1)),
        (
            "True",
            "EndpointCapacityUnavailable",
            "2 of 3 home(s) are using control-plane capacity; "
            "inspect spec.entries[].capacity.fallbackReason",
        ),
        id="EndpointCapacityUnavailable",
    ),
    pytest.param(
        a_map(a_home("worker-a", reports=5)),
        ("False", "EndpointCapacityAvailable", "endpoint capacity is available for all 1 home(s)"),
        id="EndpointCapacityAvailable",
    ),
    pytest.param(a_map(a_home("worker-a"), polling=PollingState.DISABLED), DISABLED, id="disabled"),
    pytest.param(
        a_map(a_home("worker-a", polled=False), polling=PollingState.NOT_CONFIGURED),
        DISABLED,
        id="configured-nowhere",
    ),
    pytest.param(a_map(), NO_TARGETS, id="NoCapacityTargets"),
    pytest.param(
        a_map(a_home("worker-a"), placed=False), NO_TARGETS, id="NoCapacityTargets-NotPlaced"
    ),
]


class TestCapacityFallback:
    @pytest.mark.parametrize(("inp", "expected"), FALLBACK_CASES)
    def test_every_reason(self, inp: Any, expected: tuple[str, str, str]) -> None:
        assert condition(build_trafficmap(inp), "CapacityFallback") == expected

    @pytest.mark.parametrize(("inp", "expected"), FALLBACK_CASES)
    def test_the_gauge_counts_the_same_homes_as_the_condition(
        self, inp: Any, expected: Any
    ) -> None:
        view = build_trafficmap(inp)
        assert capacity_fallback_homes(inp) == view.fallback_homes
        assert (view.fallback_homes > 0) == (expected[0] == "True")

    @pytest.mark.parametrize("polling", [PollingState.DISABLED, PollingState.NOT_CONFIGURED])
    def test_polling_off_takes_precedence_over_an_empty_table(self, polling: PollingState) -> None:
        view = build_trafficmap(a_map(polling=polling))
        assert condition(view, "CapacityFallback") == DISABLED


T0 = datetime(2026, 9, 28, 10, 0, 0, tzinfo=UTC)
ROUTABLE_TRUE = Condition("Routable", "True", "Routable", "2 home(s) serving")
PUBLISHED = {
    "type": "Published",
    "status": "True",
    "observedGeneration": 3,
    "lastTransitionTime": "2026-09-28T09:00:00Z",
    "reason": "Published",
    "message": "published",
}


class TestMergeConditions:
    def test_a_new_condition_gets_now_and_the_generation(self) -> None:
        merged = merge_conditions([], [ROUTABLE_TRUE], T0 + timedelta(microseconds=900), 4)
        assert merged == [
            {
                "type": "Routable",
                "status": "True",
                "observedGeneration": 4,
                "lastTransitionTime": "2026-09-28T10:00:00Z",
                "reason": "Routable",
                "message": "2 home(s) serving",
            }
        ]

    def test_nothing_changed_gives_the_old_list(self) -> None:
        old = merge_conditions([PUBLISHED], [ROUTABLE_TRUE], T0, 4)
        again = merge_conditions(old, [ROUTABLE_TRUE], T0 + timedelta(hours=1), 4)
        assert again == old

    def test_same_status_keeps_the_transition_time_but_takes_reason_message_and_generation(
        self,
    ) -> None:
        old = merge_conditions([], [ROUTABLE_TRUE], T0, 4)
        preserved = Condition("Routable", "True", "AllHomesProbeFailed", "preserving")
        merged = merge_conditions(old, [preserved], T0 + timedelta(minutes=5), 5)
        assert merged[0]["lastTransitionTime"] == "2026-09-28T10:00:00Z"
        assert (merged[0]["reason"], merged[0]["message"], merged[0]["observedGeneration"]) == (
            "AllHomesProbeFailed",
            "preserving",
            5,
        )

    def test_a_status_change_moves_the_transition_time(self) -> None:
        old = merge_conditions([], [ROUTABLE_TRUE], T0, 4)
        drained = Condition("Routable", "False", "TrafficDrain", "drains hold every home")
        merged = merge_conditions(old, [drained], T0 + timedelta(minutes=5), 4)
        assert merged[0]["lastTransitionTime"] == "2026-09-28T10:05:00Z"

    def test_other_types_are_kept_in_place_and_new_types_appended(self) -> None:
        fallback = Condition("CapacityFallback", "False", "NoCapacityTargets", "m")
        merged = merge_conditions([PUBLISHED], [ROUTABLE_TRUE, fallback], T0, 4)
        assert [c["type"] for c in merged] == ["Published", "Routable", "CapacityFallback"]
        assert merged[0] == PUBLISHED

    def test_a_time_in_another_zone_is_written_in_utc(self) -> None:
        east = T0.astimezone(timezone(timedelta(hours=2)))
        merged = merge_conditions([], [ROUTABLE_TRUE], east, 1)
        assert merged[0]["lastTransitionTime"] == "2026-09-28T10:00:00Z"

    def test_an_old_condition_without_a_transition_time_gets_now(self) -> None:
        old = [{"type": "Routable", "status": "True", "reason": "Routable", "message": "m"}]
        merged = merge_conditions(old, [ROUTABLE_TRUE], T0, 2)
        assert merged[0]["lastTransitionTime"] == "2026-09-28T10:00:00Z"
