"""Annotations a tenant or an editor can write are parsed within bounds.

The shadow routing annotation is on the InferenceService, which a tenant writes; the
ramp's state annotation is on the TrafficMap, which anyone allowed to edit maps can
change. Neither may raise anything but its own error (a `RecursionError` from deep
nesting would escape the reconcile's handling and fail the live map's pass), make the
controller parse hundreds of kilobytes, or be quoted whole in a log line.
"""

from __future__ import annotations

import json

import pytest

from ome_routing.core.ramps import MAX_STATE_BYTES, state_from_annotation
from ome_routing.core.shadow import ANNOTATION, MAX_ANNOTATION_BYTES, ShadowError, shadow_source

#: nested past the parser's recursion limit, yet within the size limit
DEEP = "[" * 20_000
#: a valid JSON object just over the limit: size alone refuses it
LARGE = json.dumps({"capacityFactors": {"worker-a": "1"}, "pad": "x" * MAX_ANNOTATION_BYTES})


@pytest.mark.parametrize("text", [DEEP, '{"a":' * 5_000], ids=["arrays", "objects"])
def test_a_shadow_annotation_nested_too_deeply_is_a_shadow_error(text: str) -> None:
    with pytest.raises(ShadowError) as raised:
        shadow_source({ANNOTATION: text}, None)
    message = str(raised.value)
    assert ANNOTATION in message
    assert message.endswith("is not a JSON object: nested too deeply")
    assert len(message) < 300


def test_an_oversized_shadow_annotation_is_refused_naming_its_size() -> None:
    size = len(LARGE.encode())
    with pytest.raises(ShadowError) as raised:
        shadow_source({ANNOTATION: LARGE}, None)
    message = str(raised.value)
    assert f"is {size} bytes, more than the limit of 32768" in message
    assert len(message) < 300


def test_a_shadow_annotation_at_the_limit_is_still_read() -> None:
    block = {"capacityFactors": {"worker-a": "1"}}
    pad = MAX_ANNOTATION_BYTES - len(json.dumps({**block, "pad": ""}))
    text = json.dumps({**block, "pad": "x" * pad})
    assert len(text) == MAX_ANNOTATION_BYTES
    source = shadow_source({ANNOTATION: text}, None)
    assert source is not None
    assert source.block["capacityFactors"] == {"worker-a": "1"}


@pytest.mark.parametrize(
    "text",
    [
        DEEP,
        json.dumps({"homes": {}, "pad": "x" * MAX_STATE_BYTES}),
        '{"maxIncreasePerPeriod": "0.5", "period": "10s", "homes": {"a": {"target": '
        + "9" * 5000
        + ', "weight": 1, "capacity": "1", "ramped": "1", "periodsLeft": 1}}}',
    ],
    ids=["nested", "oversized", "huge-number"],
)
def test_a_hostile_ramp_annotation_is_no_state(text: str) -> None:
    assert state_from_annotation(text) is None
