"""The series counted in plain numbers say exactly what the library's own would."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ome_routing.metrics import LoopCounter, LoopHistogram

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

amounts = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.005, 0.0050000001, 1.0, 30.0, 30.5, math.inf, -1.0]),
)


def exposition(registry: CollectorRegistry) -> str:
    # the moments the series were made differ between the two registries
    return re.sub(r"(_created\{?[^ ]*) \S+", r"\1 <created>", generate_latest(registry).decode())


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["capacity", "probe"]), amounts), max_size=40))
def test_a_loop_histogram_writes_out_what_a_histogram_does(
    observed: list[tuple[str, float]],
) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    plain = Histogram("wait_seconds", "Waits.", ["kind"], buckets=BUCKETS, registry=theirs)
    loop = LoopHistogram("wait_seconds", "Waits.", ["kind"], buckets=BUCKETS, registry=ours)
    bare = Histogram("poll_seconds", "Polls.", buckets=BUCKETS, registry=theirs)
    loop_bare = LoopHistogram("poll_seconds", "Polls.", buckets=BUCKETS, registry=ours)
    for kind, amount in observed:
        plain.labels(kind=kind).observe(amount)
        loop.labels(kind=kind).observe(amount)
        bare.observe(amount)
        loop_bare.observe(amount)
    assert exposition(ours) == exposition(theirs)


@settings(max_examples=100)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ok", "unreachable"]),
            st.floats(min_value=0, max_value=1e6, allow_nan=False),
        ),
        max_size=30,
    )
)
def test_a_loop_counter_writes_out_what_a_counter_does(counted: list[tuple[str, float]]) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    plain = Counter("polls", "Polls.", ["outcome"], registry=theirs)
    loop = LoopCounter("polls", "Polls.", ["outcome"], registry=ours)
    for outcome, amount in counted:
        plain.labels(outcome=outcome).inc(amount)
        loop.labels(outcome=outcome).inc(amount)
        plain.labels(outcome=outcome).inc()
        loop.labels(outcome=outcome).inc()
    assert exposition(ours) == exposition(theirs)


def test_a_parent_with_labels_is_not_observed_and_counts_never_go_down() -> None:
    registry = CollectorRegistry()
    histogram = LoopHistogram("wait_seconds", "Waits.", ["kind"], registry=registry)
    counter = LoopCounter("polls", "Polls.", ["outcome"], registry=registry)
    with pytest.raises(ValueError, match="missing label values"):
        histogram.observe(1.0)
    with pytest.raises(ValueError, match="missing label values"):
        counter.inc()
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels(outcome="ok").inc(-1)
    counter.labels(outcome="ok").inc(2)
    counter.labels(outcome="ok").reset()
    assert 'polls_total{outcome="ok"} 0.0' in generate_latest(registry).decode()
