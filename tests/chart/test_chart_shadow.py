"""The chart's shadow routing keys: `shadowRouting` and `crds.shadowTrafficMap.install`."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from chart_helpers import CONFIGMAP, Render, find

from ome_routing.core.config import ConfigError, config_from_multicluster
from ome_routing.core.shadow import checked_config

ROUTING_ON = {
    "ome": {
        "multicluster": {
            "enabled": True,
            "role": "control-plane",
            "config": {"routing": {"enabled": True}},
        }
    }
}
SHADOW = {
    "capacity": {
        "path": "/capacity",
        "method": "GET",
        "format": "Report",
        "samples": 4,
        "quorum": 1,
        "period": "10s",
        "timeout": "3s",
        "maxAge": "40s",
    }
}
CRD = "shadowtrafficmaps.routing.ome-routing.io"
GRANT = {"apiGroups": ["routing.ome-routing.io"], "resources": ["shadowtrafficmaps"]}


def multicluster(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = find(docs, "ConfigMap", CONFIGMAP)
    return dict(yaml.safe_load(configmap["data"]["multicluster"]))


def shadow_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    role = find(docs, "ClusterRole")
    return [
        rule for rule in role["rules"] if {k: rule[k] for k in ("apiGroups", "resources")} == GRANT
    ]


def crd_names(docs: list[dict[str, Any]]) -> set[str]:
    return {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}


def test_by_default_there_is_no_shadow_key_crd_or_grant(render: Render) -> None:
    docs = render(ROUTING_ON)
    assert "shadow" not in multicluster(docs)["config"]["routing"]
    assert CRD not in crd_names(docs)
    assert shadow_rules(docs) == []


def test_the_crd_and_exactly_the_verbs_used_come_with_install(render: Render) -> None:
    docs = render(ROUTING_ON, {"crds": {"shadowTrafficMap": {"install": True}}})
    assert CRD in crd_names(docs)
    assert [rule["verbs"] for rule in shadow_rules(docs)] == [["get", "create", "patch", "delete"]]


def test_shadow_routing_is_rendered_as_routing_shadow_and_passes_the_controllers_check(
    render: Render,
) -> None:
    docs = render(ROUTING_ON, {"shadowRouting": SHADOW})
    block = multicluster(docs)
    assert block["config"]["routing"]["shadow"] == SHADOW
    config = checked_config(config_from_multicluster(block))
    assert config.shadow == SHADOW


def test_a_bad_shadow_routing_passes_the_chart_and_the_controller_names_it(
    render: Render,
) -> None:
    bad = {"capacity": {**SHADOW["capacity"], "quorum": 5}}
    block = multicluster(render(ROUTING_ON, {"shadowRouting": bad}))
    with pytest.raises(ConfigError) as caught:
        checked_config(config_from_multicluster(block))
    assert str(caught.value) == (
        "invalid multi-cluster configuration: validate routing policy: "
        "routing.shadow.capacity.quorum (5) must not exceed samples (4)"
    )
