"""The controller's ramps (`kube.ramping`): which services ramp, and what the map gets.

With no ramp anywhere, the view is the one OME's rules built, untouched, and nothing is
asked to be written: the controller's writes are exactly those it makes without ramps.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from test_reconcile import NOW, a_map, an_isvc, chart

from ome_routing.core.capacity import Verdict
from ome_routing.core.config import OperatorConfig
from ome_routing.kube import reconcile
from ome_routing.kube.ramping import Ramps, annotations_only, with_annotations
from ome_routing.kube.reconcile import Routed

KEY = ("qwen3-0-6b", "qwen3-0-6b")
RAMP = "routing.ome-routing.io/ramp"
MAX_INCREASE = "routing.ome-routing.io/max-increase-per-period"


def annotated(value: str | None) -> dict[str, Any]:
    isvc = an_isvc()
    if value is not None:
        isvc["metadata"]["annotations"] = {MAX_INCREASE: value}
    return isvc


def routed_view(isvc: dict[str, Any], config: OperatorConfig, ceilings: dict[str, int]) -> Any:
    routed = reconcile.plan(isvc, None, config)
    assert isinstance(routed, Routed)
    verdicts = {c: Verdict(ceiling=n, fallback_reason=None) for c, n in ceilings.items()}
    return routed, reconcile.build_view(routed, verdicts)


def published(**weights: int) -> dict[str, Any]:
    entries = [{"cluster": c, "weight": w} for c, w in weights.items()]
    return a_map(spec={"entries": entries}) | {}


def test_without_a_ramp_the_view_is_untouched_and_nothing_is_written() -> None:
    isvc = annotated(None)
    routed, view = routed_view(isvc, chart(), {"worker-a": 2, "worker-b": 2})
    tmap = published(**{"worker-a": 1, "worker-b": 0})
    result = Ramps(chart()).apply(KEY, isvc, tmap, routed, view, NOW)
    assert result.view is view
    assert result.annotation is None and result.requeue_after is None
    assert result.annotation_patch(tmap) is None
    assert result.annotation_patch(None) is None


def test_with_a_ramp_the_weights_are_ramped_and_the_map_is_annotated() -> None:
    isvc = annotated("0.25")
    routed, view = routed_view(isvc, chart(), {"worker-a": 2, "worker-b": 2})
    tmap = published(**{"worker-a": 1, "worker-b": 0})
    result = Ramps(chart()).apply(KEY, isvc, tmap, routed, view, NOW)
    assert [e.weight for e in result.view.entries] == [4, 1]
    assert result.view.conditions == view.conditions  # the conditions are the targets'
    assert result.requeue_after == 10.0  # the service's poll period (examples/isvc.yaml)
    marks = result.annotation_patch(tmap)
    assert marks is not None
    state = json.loads(marks[RAMP])
    assert state["homes"]["worker-b"] == {
        "target": 1, "weight": 1, "capacity": "2", "ramped": "0.5", "periodsLeft": 3
    }  # fmt: skip


def test_turned_off_the_maps_annotation_is_removed() -> None:
    isvc = annotated(None)
    routed, view = routed_view(isvc, chart(), {"worker-a": 2, "worker-b": 2})
    tmap = published(**{"worker-a": 4, "worker-b": 1})
    tmap["metadata"]["annotations"] = {RAMP: "{}", "other": "kept"}
    tmap["metadata"]["resourceVersion"] = "42"
    result = Ramps(chart()).apply(KEY, isvc, tmap, routed, view, NOW)
    assert [e.weight for e in result.view.entries] == [1, 1]
    marks = result.annotation_patch(tmap)
    assert marks == {RAMP: None}
    assert annotations_only(tmap, marks) == {
        "metadata": {"resourceVersion": "42", "annotations": {RAMP: None}}
    }
    patch = {"metadata": {"resourceVersion": "42"}, "spec": {}}
    assert with_annotations(patch, marks)["metadata"] == {
        "resourceVersion": "42", "annotations": {RAMP: None}
    }  # fmt: skip


def test_the_annotation_wins_over_the_chart() -> None:
    config = chart(ramp={"maxIncreasePerPeriod": "0.5"})
    ramps = Ramps(config)
    chosen = ramps.setting(KEY, annotated("0.25"))
    assert chosen is not None and chosen.text == "0.25"
    chosen = ramps.setting(KEY, annotated(None))
    assert chosen is not None and chosen.text == "0.5"


@pytest.mark.parametrize("value", ["fast", "0", "1.5", ""])
def test_a_bad_annotation_turns_the_ramp_off_and_is_logged_once(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    ramps = Ramps(chart(ramp={"maxIncreasePerPeriod": "0.5"}))
    with caplog.at_level(logging.WARNING, "ome_routing.ramps"):
        for _ in range(3):
            chosen = ramps.setting(KEY, annotated(value))
            if value == "":
                assert chosen is not None and chosen.text == "0.5"  # empty: the chart's
            else:
                assert chosen is None
    expected = (
        []
        if value == ""
        else [
            f'{MAX_INCREASE} ("{value}") must be a decimal fraction in (0, 1], such as "0.25"; '
            "the ramp is off for this InferenceService"
        ]
    )
    assert [r.getMessage() for r in caplog.records] == expected
