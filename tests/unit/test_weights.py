"""Weights as OME computes them: routable replicas, milli-factors, probe gates, GCD, cap, drains."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ome_routing.core.weights import (
    MAX_WEIGHT,
    AllFailedPolicy,
    WeightInput,
    cap_weights,
    compute_weights,
    factor_milli,
    normalize,
    routable_replicas,
)


def home(
    replicas: int,
    *,
    ready: int | None = None,
    factor: Fraction | int | str = 1,
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
        ("allocated", "ready", "expected"), [(4, 4, 4), (4, 2, 2), (1, 2, 1), (0, 5, 0)]
    )
    def test_counts_the_lower_of_allocated_and_ready(
        self, allocated: int, ready: int, expected: int
    ) -> None:
        assert routable_replicas(allocated, ready) == expected


class TestFactorMilli:
    @pytest.mark.parametrize(
        ("factor", "milli"),
        [
            (None, 1000),
            (Fraction(1), 1000),
            (Fraction(3), 3000),
            (Fraction("1.5"), 1500),
            (Fraction("0.5"), 500),
            (Fraction("1.0001"), 1001),
            (Fraction("0.0015"), 2),
            (Fraction("0.0001"), 1),
            (Fraction(0), 1000),
            (Fraction(-2), 1000),
        ],
    )
    def test_a_factor_counts_in_thousandths_rounded_up(
        self, factor: Fraction | None, milli: int
    ) -> None:
        assert factor_milli(factor) == milli


class TestOmesExamples:
    """Every row of OME's weight examples table."""

    def test_factors_1_0001_and_1_with_equal_replicas_give_1001_to_1000(self) -> None:
        assert weights(home(2, factor="1.0001"), home(2)) == [1001, 1000]

    def test_factors_0_0015_and_1_give_2_to_1000_reduced_to_1_to_500(self) -> None:
        assert weights(home(2, factor="0.0015"), home(2)) == [1, 500]

    def test_reduced_raw_3000001_to_1000000_caps_to_1000000_to_333334(self) -> None:
        assert normalize([3_000_001, 1_000_000]) == [1_000_000, 333_334]
        assert weights(home(3_000_001), home(1_000_000)) == [1_000_000, 333_334]


class TestSmallestRatio:
    def test_four_and_two_ready_replicas_give_two_and_one(self) -> None:
        assert weights(home(4), home(2)) == [2, 1]

    def test_the_heterogeneous_factor_example_gives_two_and_three(self) -> None:
        assert weights(home(4), home(2, factor=3)) == [2, 3]

    def test_only_the_ratio_between_factors_matters(self) -> None:
        assert weights(home(4, factor=2), home(2, factor=6)) == weights(home(4), home(2, factor=3))

    def test_fractional_factors_count_in_thousandths(self) -> None:
        # 2 x 1500 : 3 x 334 (1/3 rounds up to 0.334) = 3000 : 1002 = 500 : 167
        assert weights(home(2, factor=Fraction(3, 2)), home(3, factor=Fraction(1, 3))) == [
            500,
            167,
        ]

    def test_a_single_home_gets_weight_one(self) -> None:
        assert weights(home(7, factor=3)) == [1]

    def test_all_zero_stays_zero(self) -> None:
        assert normalize([0, 0]) == [0, 0]
        assert normalize([]) == []

    def test_weights_are_kept_within_a_million_with_positive_weights_rounded_up(self) -> None:
        result = weights(home(3_000_000), home(1), home(1_500_000))
        assert result == [MAX_WEIGHT, 1, MAX_WEIGHT // 2]

    def test_capping_does_not_reduce_again(self) -> None:
        assert cap_weights([4_000_000, 2_000_000]) == [MAX_WEIGHT, MAX_WEIGHT // 2]
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
