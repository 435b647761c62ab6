"""Weights in four steps: routable replicas, probe gates, smallest ratio, drains."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ome_routing.core.weights import (
    MAX_WEIGHT,
    AllFailedPolicy,
    WeightInput,
    cap_weights,
    compute_weights,
    reduce_ratio,
    routable_replicas,
)


def home(
    replicas: int,
    *,
    ready: int | None = None,
    factor: Fraction | int = 1,
    gated: bool = False,
    drained: bool = False,
) -> WeightInput:
    return WeightInput(
        allocated=replicas,
        ready=replicas if ready is None else ready,
        factor=Fraction(factor),
        probe_gated=gated,
        drained=drained,
    )


def weights(*homes: WeightInput, policy: AllFailedPolicy | None = None) -> list[int]:
    return list(compute_weights(homes, policy).weights)


class TestRoutableReplicas:
    @pytest.mark.parametrize(
        ("allocated", "ready", "factor", "expected"),
        [
            (4, 4, 1, 4),
            (4, 2, 1, 2),
            (1, 2, 1, 1),
            (2, 2, 3, 6),
            (3, 3, Fraction(1, 2), Fraction(3, 2)),
            (0, 5, 3, 0),
        ],
    )
    def test_counts_the_lower_of_allocated_and_ready_times_the_factor(
        self, allocated: int, ready: int, factor: Fraction | int, expected: Fraction | int
    ) -> None:
        assert routable_replicas(allocated, ready, Fraction(factor)) == expected


class TestSmallestRatio:
    def test_four_and_two_ready_replicas_give_two_and_one(self) -> None:
        assert weights(home(4), home(2)) == [2, 1]

    def test_the_heterogeneous_factor_example_gives_two_and_three(self) -> None:
        assert weights(home(4), home(2, factor=3)) == [2, 3]

    def test_only_the_ratio_between_factors_matters(self) -> None:
        assert weights(home(4, factor=2), home(2, factor=6)) == weights(home(4), home(2, factor=3))

    def test_fractional_factors_scale_by_the_lcm_of_denominators(self) -> None:
        assert weights(home(2, factor=Fraction(3, 2)), home(3, factor=Fraction(1, 3))) == [3, 1]

    def test_a_single_home_gets_weight_one(self) -> None:
        assert weights(home(7, factor=3)) == [1]

    def test_all_zero_stays_zero(self) -> None:
        assert reduce_ratio([Fraction(0), Fraction(0)]) == [0, 0]
        assert reduce_ratio([]) == []

    def test_weights_are_kept_within_a_million_with_positive_weights_rounded_up(self) -> None:
        result = weights(home(3_000_000), home(1), home(1_500_000))
        assert result == [MAX_WEIGHT, 1, MAX_WEIGHT // 2]

    def test_capping_reduces_again_after_rounding(self) -> None:
        assert cap_weights([4_000_000, 2_000_000]) == [2, 1]
        assert cap_weights([2_000_001, 2]) == [MAX_WEIGHT, 1]

    def test_a_large_factor_is_capped_too(self) -> None:
        result = weights(home(1, factor=10**9), home(1))
        assert result == [MAX_WEIGHT, 1]


class TestProbeGates:
    def test_a_gated_home_gets_zero_and_the_others_are_reduced(self) -> None:
        assert weights(home(4), home(2, gated=True), home(2)) == [2, 0, 1]

    def test_all_gated_with_drain_policy_gives_all_zero(self) -> None:
        result = compute_weights([home(4, gated=True), home(2, gated=True)], AllFailedPolicy.DRAIN)
        assert result.weights == (0, 0)
        assert result.all_gated and not result.gates_ignored

    def test_all_gated_without_a_policy_gives_all_zero(self) -> None:
        assert weights(home(4, gated=True), home(2, gated=True)) == [0, 0]

    def test_all_gated_with_preserve_traffic_weighs_as_without_a_probe(self) -> None:
        result = compute_weights(
            [home(4, gated=True), home(2, gated=True)], AllFailedPolicy.PRESERVE_TRAFFIC
        )
        assert result.weights == (2, 1)
        assert result.gates_ignored

    def test_preserve_traffic_applies_only_when_every_home_is_gated(self) -> None:
        policy = AllFailedPolicy.PRESERVE_TRAFFIC
        assert weights(home(4, gated=True), home(2), policy=policy) == [0, 1]

    def test_a_ceiling_of_zero_gives_zero_even_when_traffic_is_preserved(self) -> None:
        """The ceiling lowered allocated to 0: PreserveTraffic keeps only ready capacity."""
        result = weights(
            home(0, ready=2, gated=True),
            home(2, gated=True),
            policy=AllFailedPolicy.PRESERVE_TRAFFIC,
        )
        assert result == [0, 1]

    def test_preserved_homes_without_ready_replicas_stay_at_zero(self) -> None:
        result = weights(
            home(2, ready=0, gated=True),
            home(2, gated=True),
            policy=AllFailedPolicy.PRESERVE_TRAFFIC,
        )
        assert result == [0, 1]


class TestDrains:
    def test_a_drained_home_gets_zero_and_the_others_keep_their_weights(self) -> None:
        result = compute_weights([home(4), home(2, drained=True), home(2)])
        assert result.before_drains == (2, 1, 1)
        assert result.weights == (2, 0, 1)

    def test_drains_apply_last_so_the_ratio_is_not_reduced_again(self) -> None:
        assert weights(home(4, drained=True), home(2), home(2)) == [0, 1, 1]
        assert weights(home(2, drained=True), home(4), home(4)) == [0, 2, 2]

    def test_draining_every_home_gives_all_zero(self) -> None:
        assert weights(home(4, drained=True), home(2, drained=True)) == [0, 0]


class TestInputChecks:
    @pytest.mark.parametrize(
        ("allocated", "ready", "factor"), [(-1, 0, 1), (0, -1, 1), (1, 1, 0), (1, 1, -2)]
    )
    def test_negative_counts_and_non_positive_factors_are_refused(
        self, allocated: int, ready: int, factor: int
    ) -> None:
        with pytest.raises(ValueError):
            WeightInput(allocated=allocated, ready=ready, factor=Fraction(factor))
