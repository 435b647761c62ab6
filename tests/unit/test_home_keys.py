"""Which capacity window a home is: OME's key of owner UID, map, cluster, endpoint, digest.

A home whose key changes starts over with an empty window; one whose key stays keeps
its window. The keys come from the raw objects, as the controller reads them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from lightkube import AsyncClient

from ome_routing.core.config import OperatorConfig, config_from_values
from ome_routing.core.digests import capacity_policy_digest
from ome_routing.kube import reconcile
from ome_routing.kube.controller import Controller, HomeKey, home_keys
from ome_routing.kube.reconcile import Routed
from ome_routing.metrics import RoutingMetrics
from ome_routing.observer.budget import RequestBudget
from ome_routing.observer.observer import Observer
from ome_routing.observer.polling import PollClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SERVICE = ("qwen3-0-6b", "qwen3-0-6b")
UID = "0f8e2c1a-5b7d-4e39-9c61-2d4a8b3f7e10"
OTHER_UID = "7c1d9e44-2a1b-4f0e-8d3c-5b6a7e8f9a01"


def chart() -> OperatorConfig:
    return config_from_values(yaml.safe_load((EXAMPLES / "values.yaml").read_text()))


def an_isvc(
    uid: str = UID, endpoint_a: str = "http://127.0.0.1:9001", **capacity: Any
) -> dict[str, Any]:
    isvc = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
    isvc["metadata"].update(uid=uid, generation=1)
    isvc["spec"]["routing"]["capacity"].update(capacity)
    isvc["status"] = {
        "placement": {
            "phase": "Placed",
            "candidates": [
                {
                    "cluster": cluster,
                    "phase": "Admitted",
                    "endpoint": endpoint,
                    "admittedReplicas": 2,
                    "readyReplicas": 2,
                }
                for cluster, endpoint in (
                    ("worker-a", endpoint_a),
                    ("worker-b", "http://127.0.0.1:9002"),
                )
            ],
        }
    }
    return isvc


def keys_of(isvc: dict[str, Any]) -> dict[str, HomeKey]:
    decision = reconcile.plan(copy.deepcopy(isvc), None, chart())
    assert isinstance(decision, Routed)
    return home_keys(SERVICE, decision)


def test_a_homes_key_is_owner_map_cluster_canonical_endpoint_and_digest() -> None:
    isvc = an_isvc()
    decision = reconcile.plan(isvc, None, chart())
    assert isinstance(decision, Routed) and decision.poll is not None
    assert keys_of(isvc)["worker-a"] == HomeKey(
        owner_uid=UID,
        namespace="qwen3-0-6b",
        name="qwen3-0-6b",
        cluster="worker-a",
        endpoint="http://127.0.0.1:9001",
        digest=capacity_policy_digest(decision.poll),
    )


def test_a_service_recreated_under_the_same_name_gets_new_homes() -> None:
    before, after = keys_of(an_isvc(uid=UID)), keys_of(an_isvc(uid=OTHER_UID))
    assert before.keys() == after.keys()
    assert all(before[cluster] != after[cluster] for cluster in before)


@pytest.mark.parametrize(
    "change",
    [{"quorum": 2}, {"period": "20s", "maxAge": "80s"}, {"timeout": "2s"}, {"samples": 5}],
    ids=["quorum", "period", "timeout", "samples"],
)
def test_a_changed_poll_setting_gives_every_home_a_new_key(change: dict[str, Any]) -> None:
    before, after = keys_of(an_isvc()), keys_of(an_isvc(**change))
    assert all(before[cluster].digest != after[cluster].digest for cluster in before)


def test_the_same_endpoint_spelled_differently_keeps_the_home() -> None:
    before = keys_of(an_isvc(endpoint_a="http://127.0.0.1:9001"))
    after = keys_of(an_isvc(endpoint_a="HTTP://127.0.0.1:9001/#top"))
    assert before == after


def test_a_new_endpoint_gives_the_home_a_new_key() -> None:
    before = keys_of(an_isvc(endpoint_a="http://127.0.0.1:9001"))
    after = keys_of(an_isvc(endpoint_a="http://127.0.0.1:9003"))
    assert before["worker-a"] != after["worker-a"]
    assert before["worker-b"] == after["worker-b"]


def test_an_endpoint_that_is_not_a_url_is_kept_as_given() -> None:
    """The observer holds the home anyway, and its verdict says why it cannot poll."""
    assert keys_of(an_isvc(endpoint_a="ftp://h"))["worker-a"].endpoint == "ftp://h"


def test_no_homes_while_polling_is_off() -> None:
    isvc = an_isvc()
    isvc["spec"]["routing"]["capacity"] = {"disabled": True}
    assert keys_of(isvc) == {}
    assert home_keys(SERVICE, None) == {}


async def test_a_reconcile_of_the_same_homes_keeps_the_keys_the_observer_holds() -> None:
    """Every reconcile reads the service afresh and makes new, equal keys; the controller
    keeps holding the observer's own, not a second copy of each home's key."""
    controller = Controller(cast(AsyncClient, None), chart(), RoutingMetrics())
    poll_client = PollClient(RequestBudget(4), 4096)
    observer = Observer(poll_client, on_change=lambda key, verdict: None)
    controller._observer = observer
    try:
        for _ in range(3):
            decision = reconcile.plan(copy.deepcopy(an_isvc()), None, chart())
            assert isinstance(decision, Routed)
            controller._sync_homes(SERVICE, decision)
        held, observed = controller._homes_of[SERVICE], observer.keys()
        assert len(held) == 2
        assert {id(key) for key in held} == {id(key) for key in observed}
    finally:
        await poll_client.close()


def test_the_keys_of_different_services_share_their_cluster_names_and_given_endpoints() -> None:
    """A key lives as long as its home: it holds one copy of what many keys say alike.

    Every read of a service decodes new strings; the keys keep the first."""
    given = "http://127.0.0.1:9001/only-in-this-test/worker-a"

    def fresh(uid: str) -> dict[str, Any]:
        isvc = an_isvc(uid=uid, endpoint_a="".join(given))
        for candidate in isvc["status"]["placement"]["candidates"]:
            candidate["cluster"] = "".join(candidate["cluster"])
        return isvc

    first_isvc = fresh(UID)
    first = keys_of(first_isvc)["worker-a"]
    second = keys_of(fresh(OTHER_UID))["worker-a"]
    assert first.cluster is second.cluster
    assert first.endpoint == given
    assert first.endpoint is first_isvc["status"]["placement"]["candidates"][0]["endpoint"]
    assert second.endpoint is first.endpoint
