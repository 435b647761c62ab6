"""The parts of an InferenceService that `traffic status` and `traffic explain` read,
decoded as OME's typed client decodes them (`decode`: a wrong type is `Unreadable`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ome_routing.kubectl.decode import (
    array,
    boolean,
    integer,
    obj,
    optional_integer,
    read_meta,
    string,
    string_map,
    strings,
    time,
    url,
)
from ome_routing.kubectl.gourl import GoURL

__all__ = ["TrafficInputs", "read_traffic_inputs"]

Value = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TrafficInputs:
    name: str
    namespace: str
    uid: str
    generation: int
    annotations: dict[str, str]
    #: `status.traffic`, or None.
    traffic: Value | None
    #: The service's addresses: `status.addresses[].url`, else `status.url` and `status.address.url`.
    endpoints: list[GoURL | None]
    canary: Value | None
    #: The effective rollout's groups: the active run's pinned plan, else `spec.rollout`.
    rollout_groups: list[Value]
    components: dict[str, Value]
    #: `spec.traffic`, or None.
    spec_traffic: Value | None


def _condition(raw: object) -> Value:
    block = obj(raw, "conditions")
    return {
        "type": string(block, "type"),
        "status": string(block, "status"),
        "reason": string(block, "reason"),
        "observedGeneration": integer(block, "observedGeneration", 64),
        "lastTransitionTime": time(block, "lastTransitionTime"),
    }


def _traffic(status: Mapping[str, Any]) -> Value | None:
    raw = status.get("traffic")
    if raw is None:
        return None
    block = obj(raw, "traffic")
    ref_raw = block.get("backendPolicyResource")
    policy = None
    if ref_raw is not None:
        ref = obj(ref_raw, "backendPolicyResource")
        policy = {
            "apiVersion": string(ref, "apiVersion"),
            "kind": string(ref, "kind"),
            "name": string(ref, "name"),
        }
    return {
        "algorithm": string(block, "algorithm"),
        "policy": policy,
        "routes": list(strings(block, "targetedHTTPRoutes")),
        "conditions": [_condition(item) for item in array(block, "conditions")],
    }


def _endpoints(status: Mapping[str, Any]) -> list[GoURL | None]:
    addresses = array(status, "addresses")
    if addresses:
        return [url(obj(item, "addresses"), "url") for item in addresses]
    out: list[GoURL | None] = []
    status_url = url(status, "url")
    if status_url is not None and status_url != GoURL():
        out.append(status_url)
    address = obj(status.get("address"), "address")
    address_url = url(address, "url")
    if address_url is not None and address_url != GoURL():
        out.append(address_url)
    return out


def _canary(status: Mapping[str, Any]) -> Value | None:
    raw = status.get("canary")
    if raw is None:
        return None
    block = obj(raw, "canary")
    return {
        "currentStep": integer(block, "currentStep"),
        "observedTrafficWeight": integer(block, "observedTrafficWeight"),
        "stableRevisionHash": string(block, "stableRevisionHash"),
        "canaryRevisionHash": string(block, "canaryRevisionHash"),
    }


def _group(raw: object) -> Value:
    block = obj(raw, "groups")
    canary_raw = block.get("canary")
    canary = None
    if canary_raw is not None:
        canary = {"steps": array(obj(canary_raw, "canary"), "steps")}
    return {"components": list(strings(block, "components")), "canary": canary}


def _rollout_groups(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[Value]:
    rollout = obj(status.get("rollout"), "rollout")
    run = rollout.get("activeRun")
    if run is not None:
        plan = obj(obj(run, "activeRun").get("plan"), "plan")
        return [_group(obj(pinned, "groups").get("group")) for pinned in array(plan, "groups")]
    spec_rollout = obj(spec.get("rollout"), "rollout")
    return [_group(item) for item in array(spec_rollout, "groups")]


def _components(status: Mapping[str, Any]) -> dict[str, Value]:
    out: dict[str, Value] = {}
    for key, raw in obj(status.get("components"), "components").items():
        block = obj(raw, "components")
        out[key] = {
            "traffic": [
                {
                    "revisionName": string(target, "revisionName"),
                    "percent": integer(target, "percent"),
                    "latestRevision": boolean(target, "latestRevision"),
                }
                for target in (obj(item, "traffic") for item in array(block, "traffic"))
            ],
            "latestRolledoutRevision": string(block, "latestRolledoutRevision"),
        }
    return out


def _headers(block: Mapping[str, Any]) -> list[str]:
    return [string(obj(item, "headers"), "name") for item in array(block, "headers")]


def _spec_traffic(spec: Mapping[str, Any]) -> Value | None:
    raw = spec.get("traffic")
    if raw is None:
        return None
    block = obj(raw, "traffic")
    algorithm = block.get("algorithm")
    if algorithm is not None and not isinstance(algorithm, str):
        algorithm = string(block, "algorithm")
    out: Value = {"algorithm": algorithm, "consistentHash": None, "endpointOverride": None}
    hash_raw = block.get("consistentHash")
    if hash_raw is not None:
        hash_block = obj(hash_raw, "consistentHash")
        cookie_raw = hash_block.get("cookie")
        out["consistentHash"] = {
            "type": string(hash_block, "type"),
            "headers": _headers(hash_block),
            "cookie": None if cookie_raw is None else string(obj(cookie_raw, "cookie"), "name"),
        }
    override_raw = block.get("endpointOverride")
    if override_raw is not None:
        override = obj(override_raw, "endpointOverride")
        out["endpointOverride"] = {"type": string(override, "type"), "headers": _headers(override)}
    return out


def read_traffic_inputs(raw: Mapping[str, Any]) -> TrafficInputs:
    """Raises `decode.Unreadable` when a field read here has the wrong type."""
    meta = read_meta(raw)
    spec = obj(raw.get("spec"), "spec")
    status = obj(raw.get("status"), "status")
    optional_integer(obj(raw.get("metadata"), "metadata"), "generation", 64)
    return TrafficInputs(
        name=meta.name,
        namespace=meta.namespace,
        uid=meta.uid,
        generation=meta.generation,
        annotations=string_map(obj(raw.get("metadata"), "metadata"), "annotations"),
        traffic=_traffic(status),
        endpoints=_endpoints(status),
        canary=_canary(status),
        rollout_groups=_rollout_groups(spec, status),
        components=_components(status),
        spec_traffic=_spec_traffic(spec),
    )
