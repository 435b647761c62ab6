"""Ramps: rises bounded per period, falls and gates at once, integer weights as OME's."""

from __future__ import annotations

import math
from datetime import timedelta
from fractions import Fraction

import pytest
from builders import T0, at
from hypothesis import given, settings
from hypothesis import strategies as st

from ome_routing.core.durations import Duration
from ome_routing.core.ramps import (
    MaxIncrease,
    RampSettingError,
    Target,
    evaluate,
    load_ramp,
    parse_max_increase,
    ramp,
    replicas_text,
    state_from_annotation,
    state_to_annotation,
)
from ome_routing.core.weights import MAX_WEIGHT, normalize

QUARTER = Fraction(1, 4)
PERIOD = Duration.parse("10s")


def homes(**replicas: int) -> list[Target]:
    """Homes with these routable replicas (factor 1), weighted as OME weighs them."""
    capacities = [n * 1000 for n in replicas.values()]
    weights = normalize(capacities)
    return [Target(c, w, cap) for c, w, cap in zip(replicas, weights, capacities, strict=True)]


def serving(*targets: Target) -> dict[str, Fraction]:
    return {t.cluster: Fraction(t.effective) for t in targets}


def replay(
    targets: list[Target], before: dict[str, Fraction], fraction: Fraction, steps: int
) -> list[tuple[int, ...]]:
    """The weights of `steps` evaluations, each a step, each from the last one."""
    seen = []
    for _ in range(steps):
        ramped = ramp(targets, before, fraction)
        seen.append(ramped.weights)
        before = {t.cluster: r for t, r in zip(targets, ramped.ramped, strict=True)}
    return seen


class TestTheWorkedExample:
    def test_a_recovering_home_takes_a_quarter_of_its_capacity_each_period(self) -> None:
        """2 replicas each, worker-b from 0 with f = 0.25: 4:1, 2:1, 4:3, 1:1."""
        a, b = homes(**{"worker-a": 2, "worker-b": 2})
        assert replay([a, b], serving(a), QUARTER, 5) == [(4, 1), (2, 1), (4, 3), (1, 1), (1, 1)]

    def test_the_periods_left_count_down_to_zero(self) -> None:
        a, b = homes(**{"worker-a": 2, "worker-b": 2})
        before = serving(a)
        left = []
        for _ in range(4):
            ramped = ramp([a, b], before, QUARTER)
            left.append(ramped.periods_left)
            before = dict(zip(("worker-a", "worker-b"), ramped.ramped, strict=True))
        assert left == [(0, 3), (0, 2), (0, 1), (0, 0)]


class TestRises:
    @pytest.mark.parametrize(
        ("fraction", "steps"),
        [("1", 1), ("0.5", 2), ("0.34", 3), ("0.25", 4), ("0.3", 4), ("0.1", 10), ("0.07", 15)],
    )
    def test_a_home_from_zero_reaches_its_target_in_ceil_one_over_f_steps(
        self, fraction: str, steps: int
    ) -> None:
        f = Fraction(fraction)
        assert MaxIncrease(f, fraction).steps == steps
        a, b = homes(a=3, b=2)
        seen = replay([a, b], serving(a), f, steps + 1)
        assert seen[steps - 1] == seen[steps] == (3, 2)
        assert all(w != (3, 2) for w in seen[: steps - 1])

    def test_the_first_step_from_zero_is_not_zero(self) -> None:
        a, b = homes(a=1000, b=1)
        ramped = ramp([a, b], serving(a), Fraction(1, 1000))
        assert ramped.weights[1] >= 1

    def test_a_rise_of_the_ceiling_is_ramped_too(self) -> None:
        """worker-b's ceiling 1 -> 3 with f = 0.25: +0.75 replica a step, from 1."""
        a, b = homes(a=1, b=3)
        before = {"a": Fraction(1000), "b": Fraction(1000)}
        # b: 1.75, 2.5, 3 replicas
        assert replay([a, b], before, QUARTER, 3) == [(4, 7), (2, 5), (1, 3)]

    def test_the_other_homes_are_not_held_back(self) -> None:
        a, b, c = homes(a=2, b=1, c=3)
        ramped = ramp([a, b, c], serving(a, b), QUARTER)
        assert ramped.ramped[:2] == (Fraction(2000), Fraction(1000))
        assert ramped.weights == (8, 4, 3)

    def test_between_steps_a_rising_home_stays_where_it_is(self) -> None:
        a, b = homes(a=2, b=2)
        ramped = ramp([a, b], {"a": Fraction(2000), "b": Fraction(500)}, QUARTER, step=False)
        assert ramped.weights == (4, 1)
        assert not ramped.stepped
        assert ramped.periods_left == (0, 3)


class TestFallsAndGates:
    def test_a_fall_applies_at_once(self) -> None:
        """worker-a's ceiling 3 -> 1 while worker-b keeps 3: 1:3 at once, not ramped."""
        a, b = homes(a=1, b=3)
        ramped = ramp([a, b], {"a": Fraction(3000), "b": Fraction(3000)}, QUARTER, step=False)
        assert ramped.weights == (1, 3)
        assert ramped.periods_left == (0, 0)

    def test_a_fall_of_a_rising_home_applies_at_once(self) -> None:
        a, b = homes(a=2, b=1)
        ramped = ramp([a, b], {"a": Fraction(2000), "b": Fraction(1500)}, QUARTER, step=False)
        assert ramped.weights == (2, 1)

    def test_a_gate_applies_at_once_even_mid_ramp(self) -> None:
        """c is ramping; a is gated (weight 0) between steps: 0 at once."""
        a, b, c = homes(a=2, b=2, c=2)
        gated = Target("a", 0, a.capacity)
        ramped = ramp(
            [gated, b, c], {"a": Fraction(2000), "b": Fraction(2000), "c": Fraction(500)},
            QUARTER, step=False,
        )  # fmt: skip
        assert ramped.weights == (0, 4, 1)

    def test_a_removed_home_is_simply_gone(self) -> None:
        (b,) = homes(b=1)
        assert ramp([b], {"a": Fraction(5000), "b": Fraction(1000)}, QUARTER).weights == (1,)

    def test_all_targets_zero_are_published_as_zero(self) -> None:
        zero = [Target("a", 0, 1000), Target("b", 0, 0)]
        assert ramp(zero, {"a": Fraction(1000)}, QUARTER).weights == (0, 0)

    def test_a_home_alone_takes_all_the_traffic_at_once(self) -> None:
        """The only other home is gated: nobody else can take the traffic."""
        a, b = homes(a=1, b=1)
        ramped = ramp([Target("a", 0, a.capacity), b], serving(a), QUARTER, step=False)
        assert ramped.weights == (0, 1)
        assert ramped.periods_left == (0, 0)


class TestIntegers:
    def test_weights_are_gcd_reduced(self) -> None:
        a, b = homes(a=2, b=2)
        (weights,) = replay([a, b], serving(a), Fraction(1, 2), 1)
        assert weights == (2, 1)

    def test_targets_are_published_verbatim_once_reached(self) -> None:
        """OME's capped weights need not be GCD-reduced (1000000:333334); they stay as is."""
        targets = [Target("a", 1_000_000, 3_000_001_000), Target("b", 333_334, 1_000_000_000)]
        assert ramp(targets, serving(*targets), QUARTER).weights == (1_000_000, 333_334)

    def test_large_weights_stay_within_omes_cap(self) -> None:
        targets = [Target("a", 1_000_000, 999_983_000), Target("b", 7, 7_000)]
        ramped = ramp(targets, {"a": Fraction(999_983_000)}, Fraction(1, 3))
        assert max(ramped.weights) <= MAX_WEIGHT
        assert all(w > 0 for w in ramped.weights)


@st.composite
def scenes(draw: st.DrawFn) -> tuple[list[Target], dict[str, Fraction], Fraction]:
    n = draw(st.integers(min_value=1, max_value=5))
    clusters = [f"c{i}" for i in range(n)]
    capacity = st.one_of(st.integers(0, 12).map(lambda r: r * 1000), st.integers(0, 2**40))
    capacities = [draw(capacity) for _ in clusters]
    gated = [draw(st.booleans()) for _ in clusters]
    open_capacities = [0 if g else cap for g, cap in zip(gated, capacities, strict=True)]
    weights = normalize(open_capacities)
    targets = [Target(*row) for row in zip(clusters, weights, capacities, strict=True)]
    before = {
        c: Fraction(draw(capacity)) / draw(st.sampled_from([1, 2, 4, 10]))
        for c in clusters
        if draw(st.booleans())
    }
    if draw(st.booleans()):
        before["gone"] = Fraction(draw(capacity))
    fraction = draw(st.fractions(min_value=Fraction(1, 50), max_value=1, max_denominator=100))
    return targets, before, fraction or Fraction(1)


PROPERTY = settings(max_examples=300, deadline=None)


@PROPERTY
@given(scenes(), st.booleans())
def test_a_home_never_rises_above_its_bound(
    scene: tuple[list[Target], dict[str, Fraction], Fraction], step: bool
) -> None:
    """Per evaluation a home's ramped capacity rises by at most f x its capacity (none
    between steps), never above its capacity; a gated home gets 0 at once; the weights
    are OME's integers, within the cap."""
    targets, before, fraction = scene
    ramped = ramp(targets, before, fraction, step=step)
    forced = not any(
        min(Fraction(t.effective), before.get(t.cluster, Fraction(0))) for t in targets
    )
    assert all(0 <= w <= MAX_WEIGHT for w in ramped.weights)
    for t, r, w in zip(targets, ramped.ramped, ramped.weights, strict=True):
        assert r <= t.effective
        if t.effective == 0:
            assert w == 0
        elif not forced:
            rise = fraction * t.effective if step else 0
            assert r <= before.get(t.cluster, Fraction(0)) + rise
        assert (w > 0) == (r > 0)
    if not ramped.in_progress:
        assert ramped.weights == tuple(t.weight for t in targets)


@PROPERTY
@given(scenes())
def test_every_home_reaches_its_target_in_the_stated_number_of_steps(
    scene: tuple[list[Target], dict[str, Fraction], Fraction],
) -> None:
    """ceil(1/f) steps from anywhere (falls count as none), and then it stays."""
    targets, before, fraction = scene
    steps = math.ceil(1 / fraction)
    seen = replay(targets, before, fraction, steps + 1)
    assert seen[steps - 1] == seen[steps] == tuple(t.weight for t in targets)


class TestSettings:
    @pytest.mark.parametrize(
        ("value", "fraction"),
        [("0.25", Fraction(1, 4)), ("1", Fraction(1)), (".5", Fraction(1, 2)),
         (0.1, Fraction(1, 10)), (1, Fraction(1))],
    )  # fmt: skip
    def test_a_decimal_in_zero_to_one_is_read(self, value: object, fraction: Fraction) -> None:
        parsed = parse_max_increase(value, "f")
        assert parsed is not None and parsed.fraction == fraction

    @pytest.mark.parametrize("value", [None, ""])
    def test_unset_is_off(self, value: object) -> None:
        assert parse_max_increase(value, "f") is None

    @pytest.mark.parametrize(
        ("value", "shown"),
        [("0", '"0"'), ("1.5", '"1.5"'), ("-0.2", '"-0.2"'), ("25%", '"25%"'), ("1e-1", '"1e-1"'),
         (" 0.5", '" 0.5"'), (True, "true"), (2, "2"), ([0.5], "[0.5]")],
    )  # fmt: skip
    def test_anything_else_is_refused_naming_the_field_and_value(
        self, value: object, shown: str
    ) -> None:
        with pytest.raises(RampSettingError) as err:
            parse_max_increase(value, "routing.ramp.maxIncreasePerPeriod")
        assert str(err.value) == (
            f"routing.ramp.maxIncreasePerPeriod ({shown}) must be a decimal fraction in "
            '(0, 1], such as "0.25"'
        )

    def test_the_chart_block(self) -> None:
        assert load_ramp(None) is None
        assert load_ramp({}) is None
        setting = load_ramp({"maxIncreasePerPeriod": "0.5"})
        assert setting is not None and setting.fraction == Fraction(1, 2)
        with pytest.raises(RampSettingError, match=r"routing.ramp must be a mapping"):
            load_ramp("0.5")


class TestEvaluate:
    SETTING = MaxIncrease(QUARTER, "0.25")

    def targets(self) -> list[Target]:
        return homes(**{"worker-a": 2, "worker-b": 2})

    def test_the_first_step_is_at_once_and_the_next_a_period_later(self) -> None:
        targets = self.targets()
        first = evaluate(targets, {"worker-a": 1}, None, self.SETTING, PERIOD, T0)
        assert first.weights == (4, 1)
        assert first.state.stepped_at == T0
        assert first.requeue_after == timedelta(seconds=10)
        published = {"worker-a": 4, "worker-b": 1}
        early = evaluate(targets, published, first.state, self.SETTING, PERIOD, at(4))
        assert early.weights == (4, 1)
        assert early.state == first.state
        assert early.requeue_after == timedelta(seconds=6)
        due = evaluate(targets, published, early.state, self.SETTING, PERIOD, at(10))
        assert due.weights == (2, 1)
        assert due.state.stepped_at == at(10)

    def test_a_restart_resumes_from_the_map(self) -> None:
        """The annotation as written is all it needs, besides the map's weights."""
        targets = self.targets()
        first = evaluate(targets, {"worker-a": 1}, None, self.SETTING, PERIOD, T0)
        text = state_to_annotation(first.state)
        assert text == (
            '{"maxIncreasePerPeriod":"0.25","period":"10s","steppedAt":"2026-09-28T10:00:00Z",'
            '"homes":{"worker-a":{"target":1,"weight":4,"capacity":"2","ramped":"2",'
            '"periodsLeft":0},"worker-b":{"target":1,"weight":1,"capacity":"2",'
            '"ramped":"0.5","periodsLeft":3}}}'
        )
        restored = state_from_annotation(text)
        assert restored == first.state
        again = evaluate(
            targets, {"worker-a": 4, "worker-b": 1}, restored, self.SETTING, PERIOD, at(3)
        )
        assert again.weights == (4, 1)

    def test_at_rest_nothing_changes(self) -> None:
        done = evaluate(
            self.targets(), {"worker-a": 1, "worker-b": 1}, None, self.SETTING, PERIOD, T0
        )
        assert done.weights == (1, 1)
        assert done.requeue_after is None
        assert done.state.stepped_at is None

    @pytest.mark.parametrize(
        "text",
        ["", "{", "[]", '{"homes": 1}', '{"homes":{},"period":"x","maxIncreasePerPeriod":"1"}'],
    )
    def test_an_unreadable_annotation_is_no_state(self, text: str) -> None:
        assert state_from_annotation(text) is None

    @pytest.mark.parametrize(
        ("milli", "text"),
        [(Fraction(2000), "2"), (Fraction(500), "0.5"), (Fraction(1875), "1.875"),
         (Fraction(1, 8), "0.000125"), (Fraction(0), "0")],
    )  # fmt: skip
    def test_capacities_are_shown_in_replicas(self, milli: Fraction, text: str) -> None:
        assert replicas_text(milli) == text


class TestNobodyElse:
    def test_a_new_map_gets_its_targets_at_once(self) -> None:
        a, b = homes(a=2, b=1)
        ramped = ramp([a, b], {}, QUARTER)
        assert ramped.weights == (2, 1)
        assert ramped.periods_left == (0, 0)

    def test_when_every_serving_home_is_gated_the_others_take_their_capacity(self) -> None:
        a, b, c = homes(a=1, b=1, c=1)
        targets = [Target("a", 0, a.capacity), b, c]
        ramped = ramp(targets, {"a": Fraction(1000)}, QUARTER)
        assert ramped.weights == (0, 1, 1)
        assert not ramped.in_progress
