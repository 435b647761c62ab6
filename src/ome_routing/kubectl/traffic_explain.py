"""`kubectl ome traffic explain`: OME's `TrafficExplainReport` of one InferenceService.

It sets the traffic the service declares (`spec.traffic`, the `ome.io/*` backend-policy
annotations and pass-through prefixes, a canary rollout group) against what the
`traffic status` report shows: whether the controller supports the intent, what it
reports realized, three checks (algorithm, policy, canary weight), the issues, and a
summary state. Header and cookie names are only counted; no value is copied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ome_routing.kubectl.traffic_inputs import TrafficInputs, read_traffic_inputs
from ome_routing.kubectl.traffic_intent import EXTENSION_ORDER, project_intent
from ome_routing.kubectl.traffic_status import project_status

__all__ = ["KIND", "project_explain"]

KIND = "TrafficExplainReport"
Value = dict[str, Any]

_FRESHNESS_RANK = {"Current": 0, "Unverifiable": 1, "Stale": 2}
_REALIZATION_INVALID = frozenset(
    (
        "RouteInvalid",
        "EndpointInvalid",
        "CanaryInvalid",
        "AllocationInvalid",
        "AllocationConflict",
        "UnknownComponentStatus",
    )
)
_POLICY_INVALID = frozenset(
    (
        "AlgorithmInvalid",
        "ConditionInvalid",
        "ConditionConflict",
        "PolicyReferenceInvalid",
        "PolicyKindUnsupported",
        "StatusCombinationInvalid",
    )
)
_TRUNCATED = frozenset(("RoutesTruncated", "EndpointsTruncated", "AllocationsTruncated"))


def _rank(freshness: str) -> int:
    return _FRESHNESS_RANK.get(freshness, 3)


def computed(freshness: str) -> Value:
    return {"evidence": "Computed", "freshness": freshness or "Unavailable"}


def _codes(status: Value) -> set[str]:
    return {issue["code"] for issue in status["issues"]}


def _support(intent: str, status: Value) -> str:
    summary, sources = status["summary"], status["summary"]["source"]
    if intent == "Absent":
        return "NotApplicable"
    if intent == "Invalid" or _codes(status) & _POLICY_INVALID:
        return "Invalid"
    if "TrafficStatusMissing" in _codes(status):
        return "Unavailable"
    if sources["policyReady"]["freshness"] != "Current":
        return "Partial"
    ready = summary["policyReady"]["status"]
    if ready == "True":
        if sources["unsupported"]["freshness"] != "Current":
            return "Partial"
        return "Honored" if summary["unsupported"] == "None" else "Partial"
    return {"Unknown": "Pending", "False": "Rejected"}.get(ready, "Unavailable")


def _realization(status: Value) -> str:
    codes = _codes(status)
    if codes & _REALIZATION_INVALID:
        return "Invalid"
    count = len(status["routes"]) + len(status["endpoints"]) + len(status["allocations"])
    if "canary" in status:
        count += 1
    if count == 0:
        return "Unavailable"
    return "Partial" if codes & _TRUNCATED else "Reported"


def _has_canary(isvc: TrafficInputs) -> bool:
    return any(group["canary"] is not None for group in isvc.rollout_groups)


def _comparisons(isvc: TrafficInputs, intent: Value, support: str, status: Value) -> list[Value]:
    summary, sources = status["summary"], status["summary"]["source"]
    state, declared = intent["state"], intent["algorithm"]
    algorithm_freshness = sources["algorithm"]["freshness"]
    if state == "Absent":
        algorithm, algorithm_freshness = "NotApplicable", "Current"
    elif state == "Invalid" or "AlgorithmInvalid" in _codes(status):
        algorithm, algorithm_freshness = "Invalid", "Unverifiable"
    elif algorithm_freshness != "Current":
        algorithm = "Unverifiable"
    else:
        algorithm = "Match" if declared == summary["algorithm"] else "Mismatch"
    policy, policy_freshness = "Unverifiable", sources["policyReady"]["freshness"]
    if state == "Absent":
        policy, policy_freshness = "NotApplicable", "Current"
    elif state == "Invalid":
        policy, policy_freshness = "Invalid", "Unverifiable"
    elif policy_freshness != "Current":
        policy = "Unverifiable"
    elif support == "Invalid":
        policy, policy_freshness = "Invalid", "Unverifiable"
    elif support in ("Honored", "Partial"):
        reported = status.get("policy")
        if reported is not None and reported["source"]["freshness"] == "Current":
            policy = "Match"
        elif reported is not None:
            policy_freshness = reported["source"]["freshness"]
        else:
            policy_freshness = "Unavailable"
    elif support == "Rejected":
        policy = "Mismatch"
    canary, canary_freshness = "NotApplicable", "Current"
    if _has_canary(isvc):
        canary, canary_freshness = "Unverifiable", "Unavailable"
        if _codes(status) & {"CanaryInvalid", "AllocationInvalid", "AllocationConflict"}:
            canary, canary_freshness = "Invalid", "Unverifiable"
        elif "canary" in status:
            canary, canary_freshness = "Match", status["canary"]["source"]["freshness"]
    return [
        {"field": "algorithm", "state": algorithm, "source": computed(algorithm_freshness)},
        {"field": "policy", "state": policy, "source": computed(policy_freshness)},
        {"field": "canary-weight", "state": canary, "source": computed(canary_freshness)},
    ]


def _unsupported_now(status: Value) -> bool:
    summary = status["summary"]
    return bool(
        summary["unsupported"] == "Present"
        and summary["source"]["unsupported"]["freshness"] == "Current"
    )


def _issues(
    intent: str, flags: tuple[bool, bool], support: str, realization: str, status: Value,
    comparisons: Sequence[Value],
) -> list[Value]:  # fmt: skip
    codes: list[str] = []
    if flags[0]:
        codes.append("DeclaredSpecInvalid")
    if flags[1]:
        codes.append("DeclaredAnnotationsInvalid")
    if status["summary"]["state"] == "Invalid":
        codes.append("ReportedEvidenceInvalid")
    if any(c["source"]["freshness"] == "Stale" for c in status["conditions"]):
        codes.append("ReportedEvidenceStale")
    if support == "Partial" and _unsupported_now(status):
        codes.append("UnsupportedDeclaredFields")
    if support == "Rejected":
        no_translator = status["summary"]["policyReady"]["reason"] == "NoTranslatorAvailable"
        codes.append("NoTranslatorAvailable" if no_translator else "PolicyRejected")
    if intent != "Absent" and support == "Unavailable":
        codes.append("IntentNotReported")
    if intent != "Absent" and realization == "Unavailable":
        codes.append("RealizationUnavailable")
    if any(c["field"] == "algorithm" and c["state"] == "Mismatch" for c in comparisons):
        codes.append("AlgorithmMismatch")
    return [{"code": code} for code in sorted(set(codes))]


def _state(
    intent: str, support: str, realization: str, status: Value, comparisons: Sequence[Value]
) -> str:
    states = {c["state"] for c in comparisons}
    if (
        intent == "Invalid"
        or support == "Invalid"
        or realization == "Invalid"
        or "Invalid" in states
    ):
        return "Invalid"
    if intent == "Absent":
        return "NoIntent"
    no_translator = status["summary"]["policyReady"]["reason"] == "NoTranslatorAvailable"
    if (support == "Partial" and _unsupported_now(status)) or (
        support == "Rejected" and no_translator
    ):
        return "Unsupported"
    if "Mismatch" in states or support == "Rejected":
        return "Mismatch"
    if support == "Pending":
        return "Pending"
    if support == "Unavailable":
        return "Unavailable"
    if (
        support == "Partial"
        or "Unverifiable" in states
        or realization in ("Partial", "Unavailable")
    ):
        return "Partial"
    return "Consistent"


def _worst(freshness: str, candidates: Sequence[str]) -> str:
    for candidate in candidates:
        if _rank(candidate) > _rank(freshness):
            freshness = candidate
    return freshness


def _support_source(support: str, status: Value) -> Value:
    if support == "NotApplicable":
        return computed("Current")
    start = "Unverifiable" if support == "Invalid" else "Current"
    sources = status["summary"]["source"]
    candidates = [sources["policyReady"]["freshness"], sources["unsupported"]["freshness"]]
    if "policy" in status:
        candidates.append(status["policy"]["source"]["freshness"])
    return computed(_worst(start, candidates))


def _realization_source(realization: str, status: Value) -> Value:
    found = [
        item["source"]["freshness"]
        for key in ("routes", "endpoints", "allocations")
        for item in status[key]
    ]
    if "canary" in status:
        found.append(status["canary"]["source"]["freshness"])
    if not found:
        result = {"evidence": "Unavailable", "freshness": "Unavailable"}
    else:
        result = {"evidence": "Reported", "freshness": _worst("Current", found)}
    if realization in ("Invalid", "Partial"):
        if result["evidence"] == "Unavailable" or _rank(result["freshness"]) < _rank(
            "Unverifiable"
        ):
            result["freshness"] = "Unverifiable"
        result["evidence"] = "Computed"
    return result


def project_explain(raw: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The report of one InferenceService as read; raises `decode.Unreadable`."""
    isvc = read_traffic_inputs(raw)
    status_report = project_status(raw, now)
    status = status_report["content"]
    intent, spec_invalid, annotations_invalid = project_intent(isvc)
    support = _support(intent["state"], status)
    realization = _realization(status)
    comparisons = _comparisons(isvc, intent, support, status)
    if intent["state"] == "Absent" and _has_canary(isvc):
        intent["state"] = "Declared"
    flags = (spec_invalid, annotations_invalid)
    issues = _issues(intent["state"], flags, support, realization, status, comparisons)
    state = _state(intent["state"], support, realization, status, comparisons)
    intent["extensions"].sort(key=lambda e: (EXTENSION_ORDER.index(e["kind"]), e["count"]))
    summary: Value = {
        "state": state,
        "intent": intent["state"],
        "support": support,
        "realization": realization,
        "source": {},
        "supportSource": _support_source(support, status),
        "realizationSource": _realization_source(realization, status),
    }
    if state == "NoIntent":
        summary["source"] = computed("Current")
    else:
        candidates = [
            summary["supportSource"]["freshness"],
            summary["realizationSource"]["freshness"],
        ]
        candidates += [c["source"]["freshness"] for c in comparisons]
        summary["source"] = computed(_worst("Current", candidates))
    warnings = {w["code"] for w in status_report["warnings"]}
    if intent["state"] != "Absent" and support == "Unavailable":
        warnings.add("SourceUnavailable")
    if state in ("Partial", "Unsupported"):
        warnings.add("PartialData")
    source = {key: value for key, value in status_report["sources"][0].items() if key != "uid"}
    return {
        "apiVersion": status_report["apiVersion"],
        "kind": KIND,
        "metadata": status_report["metadata"],
        "collectedAt": status_report["collectedAt"],
        "sources": [source],
        "content": {
            "summary": summary,
            "intent": intent,
            "reported": status,
            "comparisons": comparisons,
            "issues": issues,
        },
        "warnings": [{"code": code} for code in sorted(warnings)],
    }
