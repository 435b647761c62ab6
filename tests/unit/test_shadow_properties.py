"""Property: a shadow policy never changes the live table.

Any shadow (annotation or chart-wide; any quorum, samples, maxAge, factors, probe or
none, routing off) judged at every step of any run of readings, failed polls and probe
results leaves the live spec and conditions of every step what they are without it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.builders import at
from tests.unit.test_shadow import POLL, an_isvc, chart

from ome_routing.core.capacity import (
    Verdict,
    Window,
    empty_window,
    record_failure,
    record_reading,
    verdict,
)
from ome_routing.core.config import OperatorConfig
from ome_routing.core.probes import ProbeResult, ProbeState
from ome_routing.core.report import Reading
from ome_routing.core.shadow import ANNOTATION
from ome_routing.kube import reconcile, shadowing
from ome_routing.kube.reconcile import Routed
from ome_routing.observer.homes import window_settings

CLUSTERS = ("worker-a", "worker-b")
DIGEST = "sha256:" + "0" * 64
PROBE = {
    "path": "/healthz",
    "method": "GET",
    "acceptStatuses": [200],
    "gateStatuses": [503],
    "period": "10s",
    "timeout": "2s",
    "failureThreshold": 1,
    "successThreshold": 1,
    "allFailedPolicy": "PreserveTraffic",
}


@st.composite
def polls(draw: st.DrawFn) -> dict[str, Any]:
    samples = draw(st.integers(1, 6))
    quorum = draw(st.integers(1, samples))
    max_age = draw(st.integers(quorum * 10, 80))
    return {**POLL, "samples": samples, "quorum": quorum, "maxAge": f"{max_age}s"}


@st.composite
def shadows(draw: st.DrawFn) -> dict[str, Any]:
    block: dict[str, Any] = {}
    if draw(st.booleans()):
        block["capacity"] = draw(st.one_of(polls(), st.just({"disabled": True})))
    if draw(st.booleans()):
        block["capacityFactors"] = {
            c: draw(st.sampled_from(["0.5", "1", "2", "3"]))
            for c in CLUSTERS
            if draw(st.booleans())
        } or None
    if draw(st.booleans()):
        block["probe"] = draw(
            st.one_of(
                st.just({"disabled": True}),
                st.sampled_from(["PreserveTraffic", "Drain"]).map(
                    lambda policy: {**PROBE, "allFailedPolicy": policy}
                ),
            )
        )
    if draw(st.integers(0, 9)) == 0:
        block["enabled"] = False
    return block


#: one step: per home, a reading (servable, age in seconds), a failure, or nothing; and
#: whether its probe gates it
steps = st.lists(
    st.tuples(
        st.tuples(
            *(
                st.one_of(
                    st.none(), st.just("fail"), st.tuples(st.integers(0, 6), st.integers(0, 50))
                )
                for _ in CLUSTERS
            )
        ),
        st.tuples(*(st.booleans() for _ in CLUSTERS)),
    ),
    min_size=1,
    max_size=12,
)


def run(
    isvc: dict[str, Any],
    config: OperatorConfig,
    trace: list[Any],
    probing: bool,
) -> list[tuple[Any, ...]]:
    """The live spec and conditions at each step, judging the shadow (if any) too."""
    windows: dict[str, Window] | None = None
    seen: list[tuple[Any, ...]] = []
    for index, (outcomes, gates) in enumerate(trace):
        # planned at every step from the same object, as the controller plans from its cache
        decision = reconcile.plan(isvc, None, config)
        assert isinstance(decision, Routed), decision
        routed: Routed = decision
        poll = routed.poll
        assert poll is not None
        if windows is None:
            windows = {c: empty_window(window_settings(poll)) for c in CLUSTERS}
        now = at(10 * (index + 1))
        for cluster, outcome in zip(CLUSTERS, outcomes, strict=True):
            if outcome == "fail":
                windows[cluster] = record_failure(
                    windows[cluster], "capacity endpoint returned HTTP 503"
                )
            elif outcome is not None:
                servable, age = outcome
                reading = Reading(servable=servable, observed_at=now - timedelta(seconds=age))
                windows[cluster] = record_reading(windows[cluster], reading, now)
        verdicts: dict[str, Verdict | None] = {c: verdict(w, now) for c, w in windows.items()}
        probes = (
            {
                c: (
                    ProbeState(
                        observed=True,
                        result=ProbeResult.FAILING if g else ProbeResult.PASSING,
                        gated=g,
                        conclusive=True,
                    ),
                    DIGEST,
                )
                for c, g in zip(CLUSTERS, gates, strict=True)
            }
            if probing
            else None
        )
        view = reconcile.build_view(routed, verdicts, probes)
        shadowing.evaluate(isvc, routed, view, windows.get, probes, config, now)
        spec = reconcile.desired_spec(isvc["metadata"]["name"], routed, view)
        seen.append((json.dumps(spec, sort_keys=True), view.conditions, view.fallback_homes))
    return seen


@settings(max_examples=150, deadline=None)
@given(live=polls(), shadow=shadows(), trace=steps, probing=st.booleans(), chart_wide=st.booleans())
def test_any_shadow_leaves_the_live_table_as_without_it(
    live: dict[str, Any],
    shadow: dict[str, Any],
    trace: list[Any],
    probing: bool,
    chart_wide: bool,
) -> None:
    routing: dict[str, Any] = {"capacity": live}
    if probing:
        routing["probe"] = PROBE
    plain = an_isvc(**routing)
    without = run(plain, chart(), trace, probing)
    if chart_wide:
        with_shadow = run(an_isvc(**routing), chart(shadow=shadow), trace, probing)
    else:
        with_shadow = run(an_isvc(shadow=shadow, **routing), chart(), trace, probing)
    assert with_shadow == without


def test_the_property_sees_a_shadow_at_work() -> None:
    """Guard: the shadow of the property is judged (it diverges on this trace)."""
    isvc = an_isvc(shadow={"capacity": {**POLL, "quorum": 1}})
    assert ANNOTATION in isvc["metadata"]["annotations"]
    decision = reconcile.plan(isvc, None, chart())
    assert isinstance(decision, Routed)
    windows: dict[str, Window] = {}
    for cluster, servable in zip(CLUSTERS, (1, 4), strict=True):
        window = empty_window(window_settings(decision.poll))  # type: ignore[arg-type]
        for second in (0, 10, 20):
            window = record_reading(window, Reading(servable, at(second)), at(second))
        windows[cluster] = window
    now: datetime = at(20)
    view = reconcile.build_view(decision, {c: verdict(w, now) for c, w in windows.items()})
    result = shadowing.evaluate(isvc, decision, view, windows.get, None, chart(), now)
    assert result is not None and result.divergent == 0
    windows["worker-a"] = record_reading(windows["worker-a"], Reading(0, now), now)
    view = reconcile.build_view(decision, {c: verdict(w, now) for c, w in windows.items()})
    result = shadowing.evaluate(isvc, decision, view, windows.get, None, chart(), now)
    assert result is not None and result.divergent == 2
