"""The traffic an InferenceService declares, as `traffic explain` reads it: `spec.traffic`
(algorithm, consistent hash, endpoint override), the `ome.io/*` backend-policy
annotations and pass-through prefixes, each checked with OME's admission rules.
Header and cookie names are only counted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ome_routing.core.durations import DurationError, parse_duration
from ome_routing.kubectl.traffic_inputs import TrafficInputs

__all__ = ["EXTENSION_ORDER", "project_intent"]

Value = dict[str, Any]

_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "CircuitBreaker": (
        "ome.io/circuit-breaker-max-connections",
        "ome.io/circuit-breaker-max-parallel-requests",
        "ome.io/circuit-breaker-max-pending-requests",
        "ome.io/circuit-breaker-max-parallel-retries",
        "ome.io/circuit-breaker-per-endpoint-max-connections",
    ),
    "Retry": ("ome.io/retry-attempts", "ome.io/retry-on", "ome.io/retry-per-try-timeout"),
    "Timeout": (
        "ome.io/timeout-idle",
        "ome.io/timeout-max-connection-duration",
        "ome.io/timeout-tcp-connect",
    ),
}
_PASSTHROUGH = (("ome.io/btp.", "EnvoyPassthrough"), ("ome.io/dr.", "IstioPassthrough"))
EXTENSION_ORDER = ("CircuitBreaker", "Retry", "Timeout", "EnvoyPassthrough", "IstioPassthrough")
_DURATIONS = frozenset(
    (
        "ome.io/retry-per-try-timeout",
        "ome.io/timeout-idle",
        "ome.io/timeout-max-connection-duration",
        "ome.io/timeout-tcp-connect",
    )
)
_RETRY_ON = frozenset(
    ("5xx", "reset", "gateway-error", "connect-failure", "retriable-status-codes")
)
_ALGORITHMS = ("RoundRobin", "LeastRequest", "Random", "ConsistentHash")


def _go_atoi(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return body.isascii() and body.isdigit() and -(2**63) <= int(text) < 2**63


def _annotation_problem(key: str, value: str) -> bool:
    if key == "ome.io/retry-on":
        if value == "":
            return True
        return any(token.strip() not in _RETRY_ON for token in value.split(","))
    if key in _DURATIONS:
        try:
            parse_duration(value)
        except DurationError:
            return True
        return False
    return not _go_atoi(value)


def _declared_annotations(annotations: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    result = {
        key: annotations[key] for keys in _EXTENSIONS.values() for key in keys if key in annotations
    }
    invalid = False
    for key, value in annotations.items():
        for prefix, _ in _PASSTHROUGH:
            if key.startswith(prefix):
                result[key] = value
                invalid = invalid or key == prefix
    return result, invalid


def _annotations_invalid(annotations: Mapping[str, str]) -> bool:
    for key, value in annotations.items():
        if any(key.startswith(prefix) for prefix, _ in _PASSTHROUGH):
            continue
        if _annotation_problem(key, value):
            return True
    attempts = annotations.get("ome.io/retry-attempts")
    return attempts is not None and int(attempts) > 0 and "ome.io/retry-on" not in annotations


def _spec_invalid(traffic: Value | None) -> bool:
    """OME's `ValidateTrafficSpec`, and an algorithm outside its enum."""
    if traffic is None:
        return False
    algorithm = traffic["algorithm"]
    if algorithm is not None and algorithm not in _ALGORITHMS:
        return True
    hashed = traffic["consistentHash"]
    if (algorithm == "ConsistentHash") != (hashed is not None):
        return True
    return _hash_invalid(hashed) or _override_invalid(traffic["endpointOverride"])


def _hash_invalid(hashed: Value | None) -> bool:
    if hashed is None:
        return False
    kind, headers, cookie = hashed["type"], hashed["headers"], hashed["cookie"]
    if kind == "Header":
        return not headers or cookie is not None or "" in headers
    if kind == "Cookie":
        return cookie is None or cookie == "" or bool(headers)
    if kind == "SourceIP":
        return cookie is not None or bool(headers)
    return True


def _override_invalid(override: Value | None) -> bool:
    if override is None:
        return False
    if override["type"] == "Header":
        return not override["headers"] or "" in override["headers"]
    return bool(override["type"] != "Metadata")


def _feature(kind: str, variants: Mapping[str, str], inputs: int, invalid: bool) -> Value:
    return {
        "state": "Invalid" if invalid else "Declared",
        "variant": variants.get(kind, "Unknown"),
        "inputCount": inputs,
    }


def _absent() -> Value:
    return {"state": "Absent", "variant": "Unavailable", "inputCount": 0}


def project_intent(isvc: TrafficInputs) -> tuple[Value, bool, bool]:
    traffic = isvc.spec_traffic
    filtered, passthrough_invalid = _declared_annotations(isvc.annotations)
    spec_invalid = _spec_invalid(traffic)
    annotations_invalid = _annotations_invalid(filtered) or passthrough_invalid
    typed = traffic is not None and any(
        traffic[key] is not None for key in ("algorithm", "consistentHash", "endpointOverride")
    )
    state = "Declared" if typed or filtered else "Absent"
    if spec_invalid or annotations_invalid:
        state = "Invalid"
    algorithm = "Default"
    if traffic is not None and traffic["algorithm"] is not None:
        algorithm = traffic["algorithm"] if traffic["algorithm"] in _ALGORITHMS else "Unknown"
    hashed = None if traffic is None else traffic["consistentHash"]
    override = None if traffic is None else traffic["endpointOverride"]
    hash_feature = _absent()
    if hashed is not None:
        count = len(hashed["headers"]) if hashed["type"] == "Header" else 0
        if hashed["type"] == "Cookie" and hashed["cookie"] is not None:
            count = 1
        variants = {"Header": "Header", "Cookie": "Cookie", "SourceIP": "SourceIP"}
        hash_feature = _feature(hashed["type"], variants, count, _hash_invalid(hashed))
    override_feature = _absent()
    if override is not None:
        variants = {"Header": "Header", "Metadata": "Metadata"}
        override_feature = _feature(
            override["type"], variants, len(override["headers"]), _override_invalid(override)
        )
    extensions: list[Value] = [
        {"kind": kind, "count": sum(1 for key in keys if key in filtered)}
        for kind, keys in _EXTENSIONS.items()
    ]
    extensions += [
        {"kind": kind, "count": sum(1 for key in filtered if key.startswith(prefix))}
        for prefix, kind in _PASSTHROUGH
    ]
    intent = {
        "state": state,
        "algorithm": algorithm,
        "consistentHash": hash_feature,
        "endpointOverride": override_feature,
        "extensions": [item for item in extensions if item["count"] > 0],
        "source": {"evidence": "Declared", "freshness": "Current"},
    }
    return intent, spec_invalid, annotations_invalid
