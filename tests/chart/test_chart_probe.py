"""The chart's health probe block: its commented example, and what reaches the controller."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CHART, CONFIGMAP, Render, find, template
from tests.probe_spec import guide_probe

from ome_routing.core.config import ConfigError, config_from_multicluster
from ome_routing.core.durations import parse_duration

#: The guide's Step 1 probe, which is also OME's commented example.
GUIDE_PROBE: dict[str, Any] = guide_probe()


def with_probe(probe: Any) -> dict[str, Any]:
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": {"enabled": True, "probe": probe}},
            }
        }
    }


def multicluster(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = find(docs, "ConfigMap", CONFIGMAP)
    block = yaml.safe_load(configmap["data"]["multicluster"])
    assert isinstance(block, dict)
    return block


def test_the_commented_probe_is_the_guides_example() -> None:
    text = (CHART / "values.yaml").read_text()
    match = re.search(r"^ *# probe:\n((?: *#   .*\n)+)", text, re.MULTILINE)
    assert match is not None
    lines = [
        re.sub(r"^ *#   ", "", line).split("#")[0].rstrip() for line in match.group(1).splitlines()
    ]
    assert yaml.safe_load("\n".join(line for line in lines if line.strip())) == GUIDE_PROBE


def test_by_default_the_chart_sets_no_probe(render: Render) -> None:
    block = multicluster(render())
    assert "probe" not in block["config"]["routing"]


def test_the_guides_probe_reaches_the_controller(render: Render) -> None:
    config = config_from_multicluster(multicluster(render(with_probe(GUIDE_PROBE))))
    probe = config.probe_policy
    assert probe is not None
    assert (probe.path, probe.period, probe.timeout, probe.all_failed_policy) == (
        "/v1/models",
        parse_duration("10s"),
        parse_duration("3s"),
        "PreserveTraffic",
    )


def test_the_guides_broken_probe_passes_the_chart_and_stops_the_controller(
    render: Render,
) -> None:
    block = multicluster(render(with_probe({**GUIDE_PROBE, "timeout": "10s"})))
    with pytest.raises(ConfigError) as caught:
        config_from_multicluster(block)
    assert str(caught.value) == (
        "invalid multi-cluster configuration: routing.probe.timeout (10s) must be shorter "
        "than routing.probe.period (10s)"
    )


def test_a_status_list_of_the_wrong_type_is_rejected_by_the_schema(helm: Path) -> None:
    result = template(helm, "--set", "ome.multicluster.config.routing.probe.acceptStatuses=200")
    assert result.returncode != 0
    assert "schema" in result.stderr and "acceptStatuses" in result.stderr
