"""Routing by OME's accepted placement plan: Single winners and moves, planned drains,
retired allocations. The tables are OME's routing tests (`single_plan_test.go`,
`plan_test.go`, `retired_home_test.go`) as cases."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ome_routing.core.conditions import ROUTABLE
from ome_routing.core.drains import parse_drains
from ome_routing.core.placement import PlacementError, read_placement
from ome_routing.core.trafficmap import HomeInput, MapInput, PollingState, build_trafficmap


def a_candidate(
    cluster: str, admitted: int = 3, ready: int = 3, phase: str = "Admitted", **allocation: Any
) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "cluster": cluster,
        "phase": phase,
        "endpoint": f"http://{cluster}.example.com",
        "admittedReplicas": admitted,
        "readyReplicas": ready,
    }
    if allocation:
        candidate["allocation"] = allocation.pop("raw", allocation)
    return candidate


def placed(*candidates: dict[str, Any], plan: dict[str, Any] | None = None) -> dict[str, Any]:
    placement: dict[str, Any] = {"phase": "Placed", "candidates": list(candidates)}
    if plan is not None:
        placement["plan"] = plan
    return {"placement": placement}


def homes_of(status: dict[str, Any]) -> list[str]:
    return [home.cluster for home in read_placement({}, status).homes]


def single(winner: str = "", move: dict[str, Any] | None = None) -> dict[str, Any]:
    plan: dict[str, Any] = {"id": "plan-1", "mode": "Single", "revision": 1}
    if winner:
        plan["winner"] = winner
    if move is not None:
        plan["singleMove"] = move
    return plan


class TestSingleWinner:
    """TestSingleRoutingUsesCommittedWinner: members a (3/3) and b (1/1), both Admitted."""

    @pytest.mark.parametrize(
        ("winner", "move", "want"),
        [
            pytest.param("", None, [], id="race candidates are not published"),
            pytest.param(
                "", {"selected": "member-b"}, [], id="selection without serving authority is held"
            ),
            pytest.param("member-a", {}, ["member-a"], id="bounded probes stay unpublished"),
            pytest.param(
                "member-a",
                {"selected": "member-b"},
                ["member-a", "member-b"],
                id="selected replacement can serve alongside winner",
            ),
            pytest.param(
                "member-b",
                {"selected": "member-b"},
                ["member-b"],
                id="committed handoff excludes original",
            ),
            pytest.param(
                "member-a",
                {"selected": "member-a"},
                ["member-a"],
                id="cancelled selection excludes replacement",
            ),
            pytest.param("member-b", None, ["member-b"], id="only retained home is published"),
            pytest.param("member-c", None, [], id="absent winner does not publish loser"),
        ],
    )
    def test_only_the_committed_winner_and_a_selected_move_are_routed(
        self, winner: str, move: dict[str, Any] | None, want: list[str]
    ) -> None:
        status = placed(
            a_candidate("member-a", 3, 3), a_candidate("member-b", 1, 1), plan=single(winner, move)
        )
        assert homes_of(status) == want

    def test_the_filter_keys_on_the_plans_mode_not_the_specs(self) -> None:
        """A plan in All mode routes every admitted candidate, whatever spec.placement says."""
        plan = single("member-a") | {"mode": "All"}
        status = placed(a_candidate("member-a"), a_candidate("member-b"), plan=plan)
        spec = {"placement": {"policy": "ClusterAffinity", "mode": "Single"}}
        assert [h.cluster for h in read_placement(spec, status).homes] == ["member-a", "member-b"]


class TestSingleZeroFloor:
    """TestSingleZeroFloorRouting: both candidates keep a current home (a zero floor)."""

    @pytest.mark.parametrize(
        ("winner", "admitted", "want"),
        [
            pytest.param("", 0, [], id="idle nominees have no route"),
            pytest.param("", 1, [], id="uncommitted admitted nominee has no route"),
            pytest.param("member-a", 0, [], id="idle winner has no route"),
            pytest.param(
                "member-a", 2, ["member-a"], id="autoscaled winner can serve above its zero floor"
            ),
        ],
    )
    def test_a_zero_floor_home_serves_only_as_the_admitted_winner(
        self, winner: str, admitted: int, want: list[str]
    ) -> None:
        floor = {"currentHome": {"replicaFloors": [{"component": "engine"}]}}
        phase = "Admitting" if admitted == 0 else "Admitted"
        status = placed(
            *(
                a_candidate(c, admitted, admitted, phase=phase, raw=dict(floor))
                for c in ("member-a", "member-b")
            ),
            plan=single(winner),
        )
        assert homes_of(status) == want


class TestCancelledMove:
    """TestCancelledSingleSelectionKeepsServingUntilDrain: winner a, move selected back to a."""

    @pytest.mark.parametrize(
        ("pending", "allocation", "want"),
        [
            pytest.param(
                False,
                {"currentReplicas": 1},
                ["member-a", "member-b"],
                id="selected home can still back the floor",
            ),
            pytest.param(
                False,
                {"currentReplicas": 1, "drainRequested": True},
                ["member-a"],
                id="allocator authorizes retiring selected home",
            ),
            pytest.param(
                False,
                {"currentReplicas": 1, "raceCandidate": True},
                ["member-a"],
                id="unselected race probe never receives traffic",
            ),
            pytest.param(
                True,
                {"currentReplicas": 1},
                ["member-a"],
                id="missing selection cannot publish a retained copy",
            ),
            pytest.param(False, {}, ["member-a"], id="retired selection has no positive authority"),
        ],
    )
    def test_a_retained_home_serves_until_the_plan_drains_it(
        self, pending: bool, allocation: dict[str, Any], want: list[str]
    ) -> None:
        move = {"selected": "" if pending else "member-a"}
        status = placed(
            a_candidate("member-a", 1, 1),
            a_candidate("member-b", 1, 1, raw=allocation),
            plan=single("member-a", move),
        )
        assert homes_of(status) == want


class TestRetiredHomes:
    """retired_home_test.go: a retired allocation leaves the table, in All and Split."""

    RETIRED: ClassVar[dict[str, Any]] = {"currentReplicas": 0, "desiredReplicas": 0}

    @pytest.mark.parametrize("mode", ["All", "Split"])
    def test_a_retired_allocation_is_dropped_though_still_admitted(self, mode: str) -> None:
        status = placed(
            a_candidate("member-a", raw=dict(self.RETIRED)),
            a_candidate("member-b"),
            plan={"id": "plan-1", "mode": mode},
        )
        assert homes_of(status) == ["member-b"]

    @pytest.mark.parametrize("mode", ["All", "Split"])
    def test_a_current_home_brings_it_back(self, mode: str) -> None:
        allocation = self.RETIRED | {"currentHome": {"inputDigest": "d"}}
        status = placed(
            a_candidate("member-a", raw=allocation),
            a_candidate("member-b"),
            plan={"id": "plan-1", "mode": mode},
        )
        view = view_of(status)
        assert [(e.cluster, e.weight > 0) for e in view.entries] == [
            ("member-a", True),
            ("member-b", True),
        ]

    @pytest.mark.parametrize(
        "allocation",
        [{"currentReplicas": 1}, {"desiredReplicas": 1}, {"desiredHome": {}}, {"currentHome": {}}],
    )
    def test_any_current_or_desired_replica_or_home_keeps_it(
        self, allocation: dict[str, Any]
    ) -> None:
        status = placed(a_candidate("member-a", raw=allocation), plan={"id": "p", "mode": "All"})
        assert homes_of(status) == ["member-a"]

    def test_without_a_plan_an_allocation_changes_nothing(self) -> None:
        status = placed(a_candidate("member-a", raw=dict(self.RETIRED)))
        assert homes_of(status) == ["member-a"]

    def test_a_candidate_without_an_allocation_is_never_retired(self) -> None:
        status = placed(a_candidate("member-a"), plan={"id": "p", "mode": "All"})
        assert homes_of(status) == ["member-a"]


def view_of(status: dict[str, Any], annotation: str | None = None) -> Any:
    placement = read_placement({}, status)
    return build_trafficmap(
        MapInput(
            placed=placement.placed,
            homes=tuple(
                HomeInput(
                    cluster=h.cluster,
                    endpoint=h.endpoint,
                    admitted=h.admitted,
                    ready=h.ready,
                    plan_drained=h.plan_drained,
                )
                for h in placement.homes
            ),
            polling=PollingState.NOT_CONFIGURED,
            drains=parse_drains(annotation),
        )
    )


class TestPlannedDrain:
    """TestBuildSpecPlannedDrain: two homes, 3/3 admitted and ready, a plan present."""

    @pytest.mark.parametrize(
        ("drains", "weights", "routable"),
        [
            ((False, False), [1, 1], ("True", "Routable", "2 home(s) serving")),
            ((True, False), [0, 1], ("True", "Routable", "2 home(s) serving")),
            (
                (True, True),
                [0, 0],
                (
                    "False",
                    "NoRoutableCapacity",
                    "2 home(s) addressable but none has positive routable capacity; "
                    "all route weights are zero",
                ),
            ),
        ],
    )
    def test_a_drain_requested_home_gets_weight_zero_without_renormalising(
        self, drains: tuple[bool, bool], weights: list[int], routable: tuple[str, str, str]
    ) -> None:
        status = placed(
            *(
                a_candidate(c, raw={"currentReplicas": 3, "drainRequested": d})
                for c, d in zip(("member-a", "member-b"), drains, strict=True)
            ),
            plan={"id": "plan-1", "mode": "All"},
        )
        view = view_of(status)
        assert [e.weight for e in view.entries] == weights
        condition = view.condition(ROUTABLE)
        assert (condition.status, condition.reason, condition.message) == routable
        # healthy and capacity are untouched by the plan's drain
        assert all(e.healthy and e.capacity.allocated == 3 for e in view.entries)

    def test_the_other_homes_keep_their_ratio(self) -> None:
        status = placed(
            a_candidate("member-a", 2, 2, raw={"currentReplicas": 2, "drainRequested": True}),
            a_candidate("member-b", 4, 4),
            a_candidate("member-c", 6, 6),
            plan={"id": "plan-1", "mode": "All"},
        )
        assert [e.weight for e in view_of(status).entries] == [0, 2, 3]

    def test_without_a_plan_drain_requested_is_ignored(self) -> None:
        status = placed(a_candidate("member-a", raw={"drainRequested": True, "currentReplicas": 3}))
        assert [e.weight for e in view_of(status).entries] == [1]

    def test_a_manual_drain_after_a_planned_one_is_a_traffic_drain(self) -> None:
        """What the manual drains took away is judged after the plan's drains."""
        status = placed(
            a_candidate("member-a", raw={"currentReplicas": 3, "drainRequested": True}),
            a_candidate("member-b"),
            plan={"id": "plan-1", "mode": "All"},
        )
        view = view_of(status, '{"ops-1":{"cluster":"member-b","reason":"maintenance"}}')
        assert [e.weight for e in view.entries] == [0, 0]
        assert view.condition(ROUTABLE).reason == "TrafficDrain"

    def test_a_manual_drain_of_a_planned_drain_alone_is_not_a_traffic_drain(self) -> None:
        status = placed(
            a_candidate("member-a", raw={"currentReplicas": 3, "drainRequested": True}),
            plan={"id": "plan-1", "mode": "All"},
        )
        view = view_of(status, '{"ops-1":{"cluster":"member-a","reason":"maintenance"}}')
        assert view.condition(ROUTABLE).reason == "NoRoutableCapacity"


class TestMalformedPlans:
    @pytest.mark.parametrize(
        ("plan", "allocation", "message"),
        [
            (["x"], None, "status.placement.plan must be an object, got ['x']"),
            ({"id": 7}, None, "status.placement.plan.id must be a string, got 7"),
            ({"mode": 1}, None, "status.placement.plan.mode must be a string, got 1"),
            (
                {"mode": "Single", "winner": "a", "singleMove": "b"},
                None,
                "status.placement.plan.singleMove must be an object, got 'b'",
            ),
            (
                {"mode": "Single", "winner": "a", "singleMove": {"selected": 3}},
                None,
                "status.placement.plan.singleMove.selected must be a string, got 3",
            ),
            (
                {"mode": "All"},
                {"drainRequested": "yes"},
                "status.placement.candidates[0].allocation.drainRequested must be true or false, "
                "got 'yes'",
            ),
            (
                {"mode": "All"},
                {"currentReplicas": -1},
                "status.placement.candidates[0].allocation.currentReplicas must be a whole number "
                "0 or more, got -1",
            ),
            (
                {"mode": "All"},
                {"currentHome": "here"},
                "status.placement.candidates[0].allocation.currentHome must be an object, "
                "got 'here'",
            ),
            (
                {"mode": "All"},
                "all",
                "status.placement.candidates[0].allocation must be an object, got 'all'",
            ),
        ],
    )
    def test_a_malformed_plan_or_allocation_names_the_field_and_value(
        self, plan: Any, allocation: Any, message: str
    ) -> None:
        candidate = a_candidate("a")
        if allocation is not None:
            candidate["allocation"] = allocation
        with pytest.raises(PlacementError) as caught:
            read_placement({}, placed(candidate, plan=plan))
        assert str(caught.value) == message

    def test_the_plan_id_is_read_whenever_a_plan_exists_even_before_placement(self) -> None:
        status = {"placement": {"phase": "Pending", "plan": {"id": "plan-9", "mode": "Single"}}}
        placement = read_placement({}, status)
        assert (placement.placed, placement.homes, placement.plan_id) == (False, (), "plan-9")
