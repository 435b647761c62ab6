"""The chart's `ramp.maxIncreasePerPeriod` (ours), rendered by the real helm into the
controller's config as `routing.ramp.maxIncreasePerPeriod`, and only when set."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
import yaml
from chart_helpers import CONFIGMAP, Render, find

from ome_routing.core.config import config_from_multicluster

ROUTING_ON = {
    "ome": {
        "multicluster": {
            "enabled": True,
            "role": "control-plane",
            "config": {"routing": {"enabled": True}},
        }
    }
}


def multicluster(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = find(docs, "ConfigMap", CONFIGMAP)
    return dict(yaml.safe_load(configmap["data"]["multicluster"]))


def test_by_default_no_ramp_is_rendered(render: Render) -> None:
    block = multicluster(render(ROUTING_ON))
    assert "ramp" not in block["config"]["routing"]
    assert config_from_multicluster(block).ramp is None


@pytest.mark.parametrize("value", ["0.25", 0.25])
def test_the_value_reaches_the_controller_as_text(render: Render, value: object) -> None:
    block = multicluster(render(ROUTING_ON, {"ramp": {"maxIncreasePerPeriod": value}}))
    assert block["config"]["routing"]["ramp"] == {"maxIncreasePerPeriod": "0.25"}
    config = config_from_multicluster(block)
    assert config.ramp is not None and config.ramp.fraction == Fraction(1, 4)
