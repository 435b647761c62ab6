"""Properties of the weights: bounds, ratios, and what a capacity report can and cannot do."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st
from tm_builders import a_home, a_map

from ome_routing.core.allocation import allocate
from ome_routing.core.trafficmap import HomeInput, PollingState, build_trafficmap
from ome_routing.core.weights import (
    MAX_WEIGHT,
    AllFailedPolicy,
    WeightInput,
    compute_weights,
    raw_weight,
)

FEW = settings(max_examples=100, deadline=None)

factors = st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(1000), max_denominator=1000)
counts = st.integers(min_value=0, max_value=2**31 - 1)
small = st.integers(min_value=0, max_value=40)
weight_inputs = st.builds(
    WeightInput,
    allocated=st.one_of(small, counts),
    ready=st.one_of(small, counts),
    factor=factors,
    probe_gated=st.booleans(),
    drained=st.booleans(),
)
policies = st.sampled_from([None, *AllFailedPolicy])


@FEW
@given(st.lists(weight_inputs, min_size=1, max_size=8), policies)
def test_weights_stay_within_bounds_and_keep_their_ratio(
    homes: list[WeightInput], policy: AllFailedPolicy | None
) -> None:
    result = compute_weights(homes, policy)
    assert all(0 <= w <= MAX_WEIGHT for w in result.weights)
    open_counts = [
        0 if h.probe_gated and not result.gates_ignored else r
        for h, r in zip(homes, result.raw, strict=True)
    ]
    top_count = max(open_counts)
    top_weight = max(result.before_drains)
    if top_count == 0:
        assert result.before_drains == (0,) * len(homes)
        return
    positive = [w for w in result.before_drains if w > 0]
    if top_count // math.gcd(*open_counts) <= MAX_WEIGHT:
        assert math.gcd(*positive) == 1, "not the smallest whole-number ratio"
    else:
        assert top_weight == MAX_WEIGHT, "a capped table's largest weight is the cap"
    for count, weight in zip(open_counts, result.before_drains, strict=True):
        assert (weight > 0) == (count > 0), "a positive count must keep a positive weight"
        # Exact when no cap applied; otherwise rounded up by less than one part in MAX_WEIGHT.
        error = Fraction(weight, top_weight) - Fraction(count, top_count)
        assert 0 <= error < Fraction(1, MAX_WEIGHT)


@FEW
@given(st.lists(weight_inputs, min_size=1, max_size=8), policies)
def test_drains_zero_their_homes_and_leave_the_others_as_they_were(
    homes: list[WeightInput], policy: AllFailedPolicy | None
) -> None:
    result = compute_weights(homes, policy)
    undrained = compute_weights(
        [WeightInput(h.allocated, h.ready, h.factor, h.probe_gated, drained=False) for h in homes],
        policy,
    )
    for home, weight, before in zip(homes, result.weights, undrained.weights, strict=True):
        assert weight == (0 if home.drained else before)


@FEW
@given(admitted=counts, ready=counts, ceiling=counts, factor=factors)
def test_a_report_lowers_a_homes_routable_count_but_never_raises_it(
    admitted: int, ready: int, ceiling: int, factor: Fraction
) -> None:
    with_report = allocate(admitted, ceiling)
    without = allocate(admitted, None)
    assert with_report.allocated <= admitted
    assert without.allocated == admitted
    assert raw_weight(with_report.allocated, ready, factor) <= raw_weight(
        without.allocated, ready, factor
    )


def home_strategy(cluster: str) -> st.SearchStrategy[HomeInput]:
    return st.builds(
        lambda admitted, ready, factor, gated, reports: a_home(
            cluster,
            admitted=admitted,
            ready=ready,
            factor=factor,
            gated=gated,
            reports=reports,
        ),
        admitted=small,
        ready=small,
        factor=st.sampled_from([None, "1", "3", "500m", "1.5", "250m"]),
        gated=st.booleans(),
        reports=st.one_of(st.none(), small),
    )


homes_lists = st.lists(
    st.sampled_from(["worker-a", "worker-b", "worker-c", "worker-d"]),
    min_size=1,
    max_size=4,
    unique=True,
).flatmap(lambda names: st.tuples(*(home_strategy(n) for n in names)))


def share(weights: list[int], index: int) -> Fraction:
    total = sum(weights)
    return Fraction(weights[index], total) if total else Fraction(0)


@FEW
@given(homes_lists, st.data(), policies)
def test_a_report_never_raises_a_homes_share_of_the_traffic(
    homes: tuple[HomeInput, ...], data: st.DataObject, policy: AllFailedPolicy | None
) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(homes) - 1))
    target = homes[index]
    without = a_home(
        target.cluster,
        admitted=target.admitted,
        ready=target.ready,
        factor=str(target.factor) if target.factor else None,
        gated=target.probe_gated,
        fallback="capacity endpoint returned HTTP 404",
    )
    others = list(homes)
    reported = build_trafficmap(a_map(*others, policy=policy))
    others[index] = without
    fell_back = build_trafficmap(a_map(*others, policy=policy))
    sorted_index = sorted(h.cluster for h in homes).index(target.cluster)
    before = [e.weight for e in fell_back.entries]
    after = [e.weight for e in reported.entries]
    assert share(after, sorted_index) <= share(before, sorted_index)


@FEW
@given(homes_lists, policies)
def test_a_failed_poll_never_removes_traffic(
    homes: tuple[HomeInput, ...], policy: AllFailedPolicy | None
) -> None:
    """Every home falling back weighs exactly as with no poll at all."""
    failed = [
        a_home(
            h.cluster,
            admitted=h.admitted,
            ready=h.ready,
            factor=str(h.factor) if h.factor else None,
            gated=h.probe_gated,
            fallback="capacity endpoint unreachable: connection refused",
        )
        for h in homes
    ]
    polled = build_trafficmap(a_map(*failed, policy=policy))
    unpolled = build_trafficmap(a_map(*homes, policy=policy, polling=PollingState.NOT_CONFIGURED))
    assert [e.weight for e in polled.entries] == [e.weight for e in unpolled.entries]
    assert polled.fallback_homes == len(homes)
    for entry in polled.entries:
        assert entry.capacity.allocated == next(
            h.admitted for h in homes if h.cluster == entry.cluster
        )


@FEW
@given(homes_lists)
def test_allocated_never_exceeds_admitted(homes: tuple[HomeInput, ...]) -> None:
    view = build_trafficmap(a_map(*homes))
    admitted = {h.cluster: h.admitted for h in homes}
    for entry in view.entries:
        assert entry.capacity.allocated <= admitted[entry.cluster]
        assert (entry.capacity.source == "Endpoint") == (
            entry.capacity.reported is not None
            and entry.capacity.reported < admitted[entry.cluster]
        )
