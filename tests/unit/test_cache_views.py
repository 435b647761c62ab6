"""What the informers' caches keep of an object: what reconciles read, and nothing more."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from ome_routing.core.config import OperatorConfig, config_from_values
from ome_routing.kube import reconcile
from ome_routing.kube.watching import LAST_APPLIED, VIEWS, cached, compact, lean, routing_view

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
UID = "0f8e2c1a-5b7d-4e39-9c61-2d4a8b3f7e10"


def chart() -> OperatorConfig:
    return config_from_values(yaml.safe_load((EXAMPLES / "values.yaml").read_text()))


def an_isvc() -> dict[str, Any]:
    """The example InferenceService, placed on two clusters."""
    isvc: dict[str, Any] = yaml.safe_load((EXAMPLES / "isvc.yaml").read_text())
    isvc["metadata"].update(uid=UID, generation=3)
    candidates = [
        {
            "cluster": cluster,
            "phase": "Admitted",
            "endpoint": f"http://127.0.0.1:{port}",
            "admittedReplicas": 2,
            "readyReplicas": 2,
        }
        for cluster, port in (("worker-a", 9001), ("worker-b", 9002))
    ]
    isvc["status"] = {"placement": {"phase": "Placed", "candidates": candidates}}
    return isvc


def a_map() -> dict[str, Any]:
    owner = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "name": "qwen3-0-6b",
        "uid": UID,
        "controller": True,
    }
    return {
        "metadata": {
            "name": "qwen3-0-6b",
            "namespace": "qwen3-0-6b",
            "generation": 1,
            "ownerReferences": [owner],
        }
    }


MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]


def with_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server returns it: managed fields and kubectl's copy."""
    full = copy.deepcopy(obj)
    full["metadata"]["managedFields"] = MANAGED
    full["metadata"].setdefault("annotations", {})[LAST_APPLIED] = '{"big": "copy"}'
    return full


def test_a_cached_object_loses_its_managed_fields_and_last_applied_copy() -> None:
    full = with_server_fields(a_map())
    kept = lean(full)
    assert "managedFields" not in kept["metadata"]
    assert LAST_APPLIED not in kept["metadata"]["annotations"]
    assert kept["metadata"]["ownerReferences"] == full["metadata"]["ownerReferences"]
    assert "managedFields" in full["metadata"]  # the object given is left as it was


def test_an_object_without_them_is_kept_as_it_is() -> None:
    plain = a_map()
    assert lean(plain) is plain


def test_an_inference_services_view_keeps_routing_placement_and_metadata_only() -> None:
    isvc = with_server_fields(an_isvc())
    isvc["spec"]["model"] = {"name": "qwen3-0-6b"}
    isvc["status"]["url"] = "http://qwen3-0-6b.example.com"
    isvc["metadata"]["annotations"]["ome.io/drain"] = "worker-a"
    view = routing_view(isvc)
    assert set(view["spec"]) == {"routing", "placement"} & set(isvc["spec"])
    assert set(view["status"]) == {"placement"}
    assert view["metadata"]["annotations"] == {"ome.io/drain": "worker-a"}
    assert "managedFields" not in view["metadata"]


def test_a_reconcile_plans_the_same_from_the_view_as_from_the_whole_object() -> None:
    isvc = with_server_fields(an_isvc())
    isvc["spec"]["model"] = {"name": "qwen3-0-6b"}
    whole = reconcile.plan(isvc, a_map(), chart())
    assert isinstance(whole, reconcile.Routed)
    assert reconcile.plan(routing_view(isvc), lean(a_map()), chart()) == whole


def test_cached_objects_share_their_keys_and_short_strings() -> None:
    first = compact(json.loads(json.dumps(with_server_fields(a_map()))))
    second = compact(json.loads(json.dumps(with_server_fields(a_map()))))
    assert first == with_server_fields(a_map())
    first_keys = {id(key) for key in first["metadata"]}
    assert first_keys == {id(key) for key in second["metadata"]}
    assert first["metadata"]["name"] is second["metadata"]["name"]


def test_an_informer_caches_each_kind_as_its_reconciles_read_it() -> None:
    isvc = with_server_fields(an_isvc())
    assert VIEWS["InferenceService"](isvc) == routing_view(isvc)
    assert cached(with_server_fields(a_map())) == lean(with_server_fields(a_map()))
