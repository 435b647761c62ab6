"""The chart's `journal.enabled`, rendered by the real helm: off, nothing of the journal is
rendered or granted; on, `routing.journal.enabled` reaches the controller and the
ClusterRole grants exactly create and patch on events.events.k8s.io."""

from __future__ import annotations

from typing import Any

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
    return dict(yaml.safe_load(find(docs, "ConfigMap", CONFIGMAP)["data"]["multicluster"]))


def event_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        rule
        for doc in docs
        if doc["kind"] in ("ClusterRole", "Role")
        for rule in doc.get("rules") or ()
        if "events.k8s.io" in rule.get("apiGroups", ()) or "events" in rule.get("resources", ())
    ]


def test_off_by_default_nothing_is_rendered_or_granted(render: Render) -> None:
    docs = render(ROUTING_ON)
    assert "journal" not in multicluster(docs)["config"]["routing"]
    assert event_rules(docs) == []
    assert config_from_multicluster(multicluster(docs)).journal is False


def test_on_the_controller_journals_and_may_create_and_patch_events(render: Render) -> None:
    docs = render(ROUTING_ON, {"journal": {"enabled": True}})
    block = multicluster(docs)
    assert block["config"]["routing"]["journal"] == {"enabled": True}
    config = config_from_multicluster(block)
    assert config.journal is True
    assert config.warnings == ()
    assert event_rules(docs) == [
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
    ]
