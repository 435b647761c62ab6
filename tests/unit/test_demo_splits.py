"""How the demo and tests/gateway judge a split: exactly for Traefik, by a binomial test for Envoy."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from ome_routing_dev.demo.splits import FALSE_FAILURE, acceptance, split_is_plausible
from ome_routing_dev.demo.traffic import with_endpoint


def binomial_tail_mass(n: int, p: Fraction, lo: int, hi: int) -> Fraction:
    """P(X < lo) + P(X > hi) for X ~ Binomial(n, p), exactly."""
    return sum(
        (math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1) if not lo <= k <= hi),
        Fraction(0),
    )


@pytest.mark.parametrize(
    ("n", "p"), [(300, Fraction(2, 3)), (300, Fraction(1, 2)), (100, Fraction(1, 4))]
)
def test_the_interval_leaves_at_most_the_false_failure_rate_outside_and_no_more_room(
    n: int, p: Fraction
) -> None:
    lo, hi = acceptance(n, float(p))
    assert binomial_tail_mass(n, p, lo, hi) <= FALSE_FAILURE
    # one count narrower on either side would exceed the rate on that side
    assert binomial_tail_mass(n, p, lo + 1, n) > FALSE_FAILURE / 2
    assert binomial_tail_mass(n, p, 0, hi - 1) > FALSE_FAILURE / 2


def test_the_documented_interval_for_two_of_three_over_300() -> None:
    assert acceptance(300, 2 / 3) == (159, 238)


def test_a_split_as_weighted_passes_and_one_of_other_weights_fails() -> None:
    weights = {"worker-a": 2, "worker-b": 1}
    assert split_is_plausible({"worker-a": 197, "worker-b": 103}, weights)
    assert not split_is_plausible({"worker-a": 150, "worker-b": 150}, weights)  # 1:1
    assert not split_is_plausible({"worker-a": 300}, weights)


def test_a_home_of_weight_zero_must_serve_nothing() -> None:
    weights = {"worker-a": 0, "worker-b": 1}
    assert split_is_plausible({"worker-b": 100}, weights)
    assert not split_is_plausible({"worker-a": 1, "worker-b": 99}, weights)


def test_an_answer_from_outside_the_homes_fails() -> None:
    assert not split_is_plausible({"worker-a": 99, "HTTP 500": 1}, {"worker-a": 1})
    assert not split_is_plausible({}, {"worker-a": 0})


def test_the_demo_publishes_omes_default_backends_unless_the_gateway_needs_endpoint_slices() -> (
    None
):
    step1 = {"ome": {"multicluster": {"config": {"routing": {"enabled": True}}}}}
    default = with_endpoint(step1, "ome-gateway/global", 8080, hostname_endpoint_slices=False)
    endpoint = default["ome"]["multicluster"]["config"]["endpoint"]
    assert "gatewayBackend" not in endpoint
    slices = with_endpoint(step1, "ome-gateway/global", 8080)
    assert slices["ome"]["multicluster"]["config"]["endpoint"]["gatewayBackend"] == {
        "hostnameEndpointSlices": True
    }
