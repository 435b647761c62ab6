"""`kubectl ome traffic status`: OME's `TrafficStatusReport` of one InferenceService.

The report reads only the InferenceService: the backend traffic policy its controller
reports in `status.traffic` (algorithm, policy, targeted HTTPRoutes, the
`BackendPolicyReady` and `BackendPolicyUnsupportedFields` conditions), its addresses,
its canary, and each component's revision weights. Values outside OME's closed sets are
issues, never copied text; nothing here claims the data plane realized what is reported.
Routing's TrafficMaps are not part of it (`placement endpoint` shows them).

Why one module of ~450 lines: it is one projection, `_Projector`, whose sections
(`status.traffic` and its conditions, the addresses, the canary, the revision weights)
all add to the same report, issue list and summary, in OME's order, which `truncate` and
`finish` then close. Its checks of single values (`traffic_checks`), its inputs
(`traffic_inputs`) and its printing (`traffic_tables`) are modules of their own already.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ome_routing.core.names import dns1123_subdomain_problems
from ome_routing.core.report import format_rfc3339
from ome_routing.kubectl.decode import Unreadable
from ome_routing.kubectl.traffic_checks import (
    COMPONENTS,
    canary_primary,
    proves_no_unsupported,
    revision_hash,
    sanitize_endpoint,
    valid_canary,
    valid_combination,
)
from ome_routing.kubectl.traffic_inputs import TrafficInputs, read_traffic_inputs

__all__ = ["COMPONENTS", "KIND", "Unreadable", "project_status", "read_traffic_inputs"]

KIND = "TrafficStatusReport"
API_VERSION = "cli.ome.io/v1alpha1"
MAX_ROUTES = 4
MAX_ENDPOINTS = 16
MAX_ALLOCATIONS = 8
_ALGORITHMS = ("Default", "RoundRobin", "LeastRequest", "Random", "ConsistentHash")
_REASONS = (
    "AcceptedByGateway",
    "ConflictingPolicy",
    "UnsupportedField",
    "NoTranslatorAvailable",
    "GatewayRejected",
    "Pending",
    "TranslationFailed",
)
_READY = "BackendPolicyReady"
_UNSUPPORTED = "BackendPolicyUnsupportedFields"
_ZERO_TIME = "0001-01-01T00:00:00Z"
_EARLIEST = datetime.min.replace(tzinfo=UTC)

Value = dict[str, Any]


def source(evidence: str, freshness: str) -> Value:
    return {"evidence": evidence, "freshness": freshness}


def component_rank(component: str) -> int:
    return COMPONENTS.index(component) if component in COMPONENTS else 3


class _Projector:
    def __init__(self, isvc: TrafficInputs) -> None:
        self.isvc = isvc
        self.issues: list[Value] = []
        self.seen: set[tuple[str, str]] = set()
        self.invalid = self.partial = self.stale = self.truncated = False
        self.ready: Value | None = None
        self.unsupported: Value | None = None
        unavailable = source("Reported", "Unavailable")
        self.summary: Value = {
            "state": "Unavailable",
            "translator": "Unavailable",
            "algorithm": "Unknown",
            "policyReady": {"status": "Unknown", "reason": "NotReported"},
            "unsupported": "Unknown",
            "source": {
                "state": source("Computed", "Unverifiable"),
                "translator": source("Computed", "Unavailable"),
                "algorithm": dict(unavailable),
                "policyReady": dict(unavailable),
                "unsupported": dict(unavailable),
            },
        }
        self.policy: Value | None = None
        self.routes: list[Value] = []
        self.endpoints: list[Value] = []
        self.canary: Value | None = None
        self.allocations: list[Value] = []
        self.conditions: list[Value] = []

    def add_issue(self, code: str, component: str, invalid: bool) -> None:
        if invalid:
            self.invalid = True
        if (code, component) in self.seen:
            return
        self.seen.add((code, component))
        self.issues.append({"code": code, **({"component": component} if component else {})})

    def truncate(self) -> None:
        self.truncated = self.partial = True

    # --- status.traffic -----------------------------------------------------------------

    def traffic(self) -> None:
        status = self.isvc.traffic
        if status is None:
            self.add_issue("TrafficStatusMissing", "", False)
            return
        self.project_conditions(status["conditions"])
        freshness = "Unavailable"
        if self.ready is not None:
            freshness = self.ready["source"]["freshness"]
            self.summary["policyReady"] = {
                "status": self.ready["status"],
                "reason": self.ready["reason"],
            }
            self.summary["source"]["policyReady"] = dict(self.ready["source"])
        else:
            self.add_issue("PolicyConditionMissing", "", False)
            self.partial = True
        self.summary["source"]["algorithm"] = source("Reported", freshness)
        algorithm = status["algorithm"]
        if algorithm not in _ALGORITHMS:
            self.add_issue("AlgorithmInvalid", "", True)
            algorithm = "Unknown"
        self.summary["algorithm"] = algorithm
        self.project_policy(status["policy"], freshness)
        self.project_routes(status["routes"], freshness)
        if status["policy"] is None and status["routes"]:
            self.add_issue("StatusCombinationInvalid", "", True)
        if self.ready is not None and self.ready["status"] == "True" and self.policy is None:
            self.add_issue("StatusCombinationInvalid", "", True)
        self.project_unsupported()
        ready = self.ready
        if (
            ready is not None
            and ready["reason"] == "NoTranslatorAvailable"
            and status["policy"] is None
        ):
            # No translator: the translator is known to be none, as of the condition.
            self.summary["translator"] = "Unavailable"
            self.summary["source"]["translator"] = source("Computed", ready["source"]["freshness"])

    def project_unsupported(self) -> None:
        summary, sources = self.summary, self.summary["source"]
        if self.unsupported is not None and self.unsupported["status"] == "True":
            summary["unsupported"] = "Present"
            sources["unsupported"] = dict(self.unsupported["source"])
            self.partial = True
        elif self.unsupported is not None:
            sources["unsupported"] = dict(self.unsupported["source"])
        elif proves_no_unsupported(self.ready):
            assert self.ready is not None
            summary["unsupported"] = "None"
            sources["unsupported"] = dict(self.ready["source"])
        elif self.ready is not None:
            sources["unsupported"] = dict(self.ready["source"])

    def project_conditions(self, conditions: list[Value]) -> None:
        ordered = sorted(
            (c for c in conditions if c["type"] in (_READY, _UNSUPPORTED)),
            key=lambda c: (
                c["type"],
                c["status"],
                c["reason"],
                c["observedGeneration"],
                c["lastTransitionTime"] or _EARLIEST,
            ),
        )
        seen: set[str] = set()
        for condition in ordered:
            kind = condition["type"]
            if kind in seen:
                self.add_issue("ConditionConflict", "", True)
                continue
            seen.add(kind)
            projected, valid = self.project_condition(condition)
            if not valid:
                self.add_issue("ConditionInvalid", "", True)
            self.conditions.append(projected)
            if kind == _READY:
                self.ready = projected
            else:
                self.unsupported = projected

    def project_condition(self, condition: Value) -> tuple[Value, bool]:
        freshness = "Stale"
        if condition["observedGeneration"] == self.isvc.generation:
            freshness = "Current"
        else:
            self.stale = self.partial = True
        status = condition["status"]
        status_ok = status in ("True", "False", "Unknown")
        if not status_ok:
            status = "Unknown"
        reason = condition["reason"]
        reason_ok = reason in _REASONS
        if not reason_ok:
            reason = "Unknown"
        moment = condition["lastTransitionTime"]
        valid = (
            status_ok
            and reason_ok
            and valid_combination(condition["type"], status, reason)
            and moment is not None
        )
        if not valid:
            status = "Unknown"
        stamp = _ZERO_TIME if moment is None else format_rfc3339(moment)
        return {
            "type": condition["type"],
            "status": status,
            "reason": reason,
            "observedGeneration": condition["observedGeneration"],
            "lastTransitionTime": stamp,
            "source": source("Reported", freshness),
        }, valid

    def project_policy(self, ref: Value | None, freshness: str) -> None:
        if ref is None:
            return
        if dns1123_subdomain_problems(ref["name"]):
            self.add_issue("PolicyReferenceInvalid", "", True)
            return
        if (
            ref["apiVersion"] == "gateway.envoyproxy.io/v1alpha1"
            and ref["kind"] == "BackendTrafficPolicy"
        ):
            self.summary["translator"] = "envoy-gateway"
        elif ref["apiVersion"] == "networking.istio.io/v1" and ref["kind"] == "DestinationRule":
            self.summary["translator"] = "istio"
        else:
            self.add_issue("PolicyKindUnsupported", "", True)
            return
        self.summary["source"]["translator"] = source("Computed", freshness)
        self.policy = {
            "apiVersion": ref["apiVersion"],
            "kind": ref["kind"],
            "namespace": self.isvc.namespace,
            "name": ref["name"],
            "source": source("Reported", freshness),
        }

    def project_routes(self, names: list[str], freshness: str) -> None:
        unique: set[str] = set()
        for name in names:
            if dns1123_subdomain_problems(name):
                self.add_issue("RouteInvalid", "", True)
                continue
            unique.add(name)
        kept = sorted(unique)
        if len(kept) > MAX_ROUTES:
            kept = kept[:MAX_ROUTES]
            self.add_issue("RoutesTruncated", "", False)
            self.truncate()
        self.routes = [{"name": name, "source": source("Reported", freshness)} for name in kept]

    # --- addresses, canary, revision weights --------------------------------------------

    def project_endpoints(self) -> None:
        unique: set[str] = set()
        for url in self.isvc.endpoints:
            sanitized = sanitize_endpoint(url)
            if sanitized is None:
                self.add_issue("EndpointInvalid", "", True)
                continue
            unique.add(sanitized)
        kept = sorted(unique)
        if len(kept) > MAX_ENDPOINTS:
            kept = kept[:MAX_ENDPOINTS]
            self.add_issue("EndpointsTruncated", "", False)
            self.truncate()
        self.endpoints = [
            {"url": url, "source": source("Reported", "Unverifiable")} for url in kept
        ]

    def project_canary(self) -> None:
        status = self.isvc.canary
        if status is None:
            return
        groups = [group for group in self.isvc.rollout_groups if group["canary"] is not None]
        if len(groups) > 1:
            self.add_issue("CanaryInvalid", "", True)
            return
        group = groups[0] if groups else None
        component = canary_primary(group)
        steps = len(group["canary"]["steps"]) if group is not None else 0
        if component is None or not 0 < steps <= 20 or not valid_canary(status, steps):
            self.add_issue("CanaryInvalid", "", True)
            return
        self.canary = {
            "component": component,
            "currentStep": status["currentStep"],
            "totalSteps": steps,
            "observedTraffic": status["observedTrafficWeight"],
            "stableRevisionHash": status["stableRevisionHash"],
            "canaryRevisionHash": status["canaryRevisionHash"],
            "source": source("Reported", "Unverifiable"),
        }

    def project_allocations(self) -> None:
        for component in self.isvc.components:
            if component not in COMPONENTS:
                self.add_issue("UnknownComponentStatus", "", True)
        for component in COMPONENTS:
            status = self.isvc.components.get(component)
            if status is None or not status["traffic"]:
                continue
            self.component_allocations(component, status)

    def component_allocations(self, component: str, status: Value) -> None:
        candidates: list[tuple[str, str, int, bool]] = []
        total = 0
        for target in status["traffic"]:
            total += target["percent"]
            name = target["revisionName"]
            hash_ = revision_hash(self.isvc.name, component, name)
            if not 0 <= target["percent"] <= 100 or hash_ is None:
                self.add_issue("AllocationInvalid", component, True)
                continue
            candidates.append((name, hash_, target["percent"], target["latestRevision"]))
        if total != 100:
            self.add_issue("AllocationInvalid", component, True)
        candidates.sort(key=lambda c: (c[0], c[2], c[3]))
        unique: list[tuple[str, str, int, bool]] = []
        for candidate in candidates:
            if unique and unique[-1][0] == candidate[0]:
                self.add_issue("AllocationConflict", component, True)
                continue
            unique.append(candidate)
        if len(unique) > MAX_ALLOCATIONS:
            unique = unique[:MAX_ALLOCATIONS]
            self.add_issue("AllocationsTruncated", component, False)
            self.truncate()
        for name, hash_, percent, latest in unique:
            self.allocations.append(
                {
                    "component": component,
                    "role": self.role(component, hash_, name, latest, status),
                    "revisionName": name,
                    "revisionHash": hash_,
                    "percent": percent,
                    "source": source("Reported", "Unverifiable"),
                }
            )

    def role(self, component: str, hash_: str, name: str, latest: bool, status: Value) -> str:
        canary = self.canary
        if canary is not None and canary["component"] == component:
            if canary["stableRevisionHash"] and hash_ == canary["stableRevisionHash"]:
                return "stable"
            if hash_ == canary["canaryRevisionHash"]:
                return "stable" if canary["currentStep"] == canary["totalSteps"] else "canary"
        if latest or name == status["latestRolledoutRevision"]:
            return "stable"
        return "other"

    def finish(self) -> None:
        ready = self.ready
        if self.invalid:
            state = "Invalid"
        elif self.isvc.traffic is None or ready is None:
            state = "Unavailable"
        elif ready["source"]["freshness"] != "Current":
            state = "Partial"
        elif ready["status"] == "False":
            state = "Degraded"
        elif ready["status"] in ("Unknown", "True"):
            fine = "Pending" if ready["status"] == "Unknown" else "Reported"
            state = "Partial" if self.partial else fine
        else:
            state = "Invalid"
        self.summary["state"] = state


def _issue_key(issue: Value) -> tuple[int, str, str]:
    component = issue.get("component", "")
    return component_rank(component), component, issue["code"]


def project_status(raw: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The report of one InferenceService as read; raises `Unreadable` if it does not decode."""
    isvc = read_traffic_inputs(raw)
    projector = _Projector(isvc)
    projector.traffic()
    projector.project_endpoints()
    projector.project_canary()
    projector.project_allocations()
    projector.finish()
    content: Value = {"summary": projector.summary}
    if projector.policy is not None:
        content["policy"] = projector.policy
    content["routes"] = projector.routes
    content["endpoints"] = projector.endpoints
    if projector.canary is not None:
        content["canary"] = projector.canary
    content["allocations"] = sorted(
        projector.allocations,
        key=lambda a: (
            component_rank(a["component"]),
            a["component"],
            ("stable", "canary").index(a["role"]) if a["role"] in ("stable", "canary") else 2,
            a["role"],
            a["revisionName"],
        ),
    )
    content["conditions"] = sorted(
        projector.conditions, key=lambda c: (0 if c["type"] == _READY else 1, c["type"])
    )
    content["issues"] = sorted(projector.issues, key=_issue_key)
    warnings = []
    if projector.invalid or projector.partial:
        warnings.append("PartialData")
    if projector.stale:
        warnings.append("StaleEvidence")
    if projector.truncated:
        warnings.append("Truncated")
    stamp = format_rfc3339(now)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"namespace": isvc.namespace, "name": isvc.name},
        "collectedAt": stamp,
        "sources": [
            {
                "kind": "InferenceService",
                "namespace": isvc.namespace,
                "name": isvc.name,
                "uid": isvc.uid,
                "generation": isvc.generation,
                "evidence": "Reported",
                "collectedAt": stamp,
            }
        ],
        "content": content,
        "warnings": [{"code": code} for code in sorted(warnings)],
    }
