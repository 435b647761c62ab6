"""The tables of `traffic status` (FIELD COMP VALUE SOURCE) and `traffic explain`
(LAYER STATE VALUE SOURCE; `-o wide`: LAYER FIELD STATE VALUE SOURCE), as OME prints them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ome_routing.kubectl.table import render_table

__all__ = ["explain_table", "status_table"]

Value = Mapping[str, Any]
STATUS_HEADERS = ("FIELD", "COMP", "VALUE", "SOURCE")


def cell(source: Value) -> str:
    if not source.get("evidence") or not source.get("freshness"):
        return "-"
    return f"{source['evidence']}/{source['freshness']}"


def _step(canary: Value) -> int:
    step = int(canary["currentStep"]) + 1
    return int(canary["totalSteps"]) if canary["currentStep"] >= canary["totalSteps"] else step


def _summary_rows(content: Value) -> list[list[str]]:
    summary, sources = content["summary"], content["summary"]["source"]
    ready = summary["policyReady"]
    return [
        ["STATE", "-", summary["state"], cell(sources["state"])],
        ["TRANSLATOR", "-", summary["translator"], cell(sources["translator"])],
        ["ALGORITHM", "-", summary["algorithm"], cell(sources["algorithm"])],
        ["POLICY-READY", "-", f"{ready['status']}/{ready['reason']}", cell(sources["policyReady"])],
        ["UNSUPPORTED", "-", summary["unsupported"], cell(sources["unsupported"])],
    ]


def _issue_rows(issues: list[Value], layer: str = "ISSUE") -> list[list[str]]:
    return [
        [layer, issue.get("component") or "-", issue["code"], "Computed/Unverifiable"]
        for issue in issues
    ]


def _condition_value(condition: Value) -> str:
    return (
        f"{condition['type']}={condition['status']}/{condition['reason']} "
        f"gen={condition['observedGeneration']} at={condition['lastTransitionTime']}"
    )


def _policy_value(policy: Value) -> str:
    return "/".join((policy["apiVersion"], policy["kind"], policy["namespace"], policy["name"]))


def status_rows(content: Value, *, wide: bool) -> list[list[str]]:
    rows = _summary_rows(content)
    canary = content.get("canary")
    if not wide:
        ready_source = content["summary"]["source"]["policyReady"]
        routes, endpoints = content["routes"], content["endpoints"]
        rows.append(
            ["ROUTES", "-", str(len(routes)), cell(routes[0]["source"] if routes else ready_source)]
        )
        endpoint_source = (
            endpoints[0]["source"]
            if endpoints
            else {"evidence": "Reported", "freshness": "Unverifiable"}
        )
        rows.append(["ENDPOINTS", "-", str(len(endpoints)), cell(endpoint_source)])
    else:
        if "policy" in content:
            policy = content["policy"]
            rows.append(["POLICY", "-", _policy_value(policy), cell(policy["source"])])
        rows += [
            ["ROUTE", "-", route["name"], cell(route["source"])] for route in content["routes"]
        ]
        rows += [
            ["ENDPOINT", "-", item["url"], cell(item["source"])] for item in content["endpoints"]
        ]
    if canary is not None:
        value = f"{_step(canary)}/{canary['totalSteps']} @ {canary['observedTraffic']}%"
        rows.append(["CANARY", canary["component"], value, cell(canary["source"])])
    for allocation in content["allocations"]:
        if wide:
            target = f"{allocation['role']}:{allocation['revisionName']}={allocation['percent']}%"
            rows.append(["TARGET", allocation["component"], target, cell(allocation["source"])])
        else:
            weight = f"{allocation['role']}:{allocation['revisionHash']}={allocation['percent']}%"
            rows.append(["WEIGHT", allocation["component"], weight, cell(allocation["source"])])
    if wide:
        rows += [
            ["CONDITION", "-", _condition_value(c), cell(c["source"])]
            for c in content["conditions"]
        ]
    return rows + _issue_rows(content["issues"])


def status_table(report: Value, *, wide: bool = False) -> str:
    return render_table(STATUS_HEADERS, status_rows(report["content"], wide=wide))


# --- explain -----------------------------------------------------------------------------


def _feature(feature: Value) -> str:
    if feature["state"] == "Absent":
        return "-"
    return f"{feature['variant']} inputs={feature['inputCount']}"


def _reported_algorithm_state(summary: Value) -> str:
    if summary["source"]["algorithm"]["freshness"] == "Unavailable":
        return "Unavailable"
    return "Invalid" if summary["algorithm"] == "Unknown" else "Reported"


def _reported_rows(reported: Value) -> list[list[str]]:
    summary, sources = reported["summary"], reported["summary"]["source"]
    ready = summary["policyReady"]
    rows = [
        [
            "REPORTED",
            "algorithm",
            _reported_algorithm_state(summary),
            summary["algorithm"],
            cell(sources["algorithm"]),
        ],
        ["REPORTED", "translator", "Computed", summary["translator"], cell(sources["translator"])],
        [
            "REPORTED",
            "policy-ready",
            ready["status"],
            ready["reason"],
            cell(sources["policyReady"]),
        ],
        ["REPORTED", "unsupported", summary["unsupported"], "-", cell(sources["unsupported"])],
    ]
    if "policy" in reported:
        policy = reported["policy"]
        rows.append(
            ["REPORTED", "policy", "Reported", _policy_value(policy), cell(policy["source"])]
        )
    rows += [
        ["REPORTED", "route", "Reported", r["name"], cell(r["source"])] for r in reported["routes"]
    ]
    rows += [
        ["OBSERVED", "endpoint", "Reported", e["url"], cell(e["source"])]
        for e in reported["endpoints"]
    ]
    canary = reported.get("canary")
    if canary is not None:
        step = f"{canary['component']} step={_step(canary)}/{canary['totalSteps']} traffic={canary['observedTraffic']}%"
        source = cell(canary["source"])
        rows += [
            ["OBSERVED", "canary", "Reported", step, source],
            [
                "OBSERVED",
                "stable-revision",
                "Reported",
                canary["stableRevisionHash"] or "-",
                source,
            ],
            [
                "OBSERVED",
                "canary-revision",
                "Reported",
                canary["canaryRevisionHash"] or "-",
                source,
            ],
        ]
    for allocation in reported["allocations"]:
        target = (
            f"{allocation['component']}/{allocation['role']}/"
            f"{allocation['revisionName']}={allocation['percent']}%"
        )
        rows.append(["OBSERVED", "target", "Reported", target, cell(allocation["source"])])
    rows += [
        ["REPORTED", "condition", "Reported", _condition_value(c), cell(c["source"])]
        for c in reported["conditions"]
    ]
    for issue in reported["issues"]:
        rows.append(
            [
                "REPORTED-ISSUE",
                issue.get("component") or "-",
                "-",
                issue["code"],
                "Computed/Unverifiable",
            ]
        )
    return rows


def explain_rows(report: Value, *, wide: bool) -> list[list[str]]:
    content = report["content"]
    summary, intent, reported = content["summary"], content["intent"], content["reported"]
    if not wide:
        counts = (
            f"r={len(reported['routes'])} e={len(reported['endpoints'])} "
            f"w={len(reported['allocations'])}"
        )
        translator = reported["summary"]["source"]["translator"]
        rows = [
            ["SUMMARY", summary["state"], "-", cell(summary["source"])],
            ["INTENT", intent["state"], intent["algorithm"], cell(intent["source"])],
            ["SUPPORT", summary["support"], "-", cell(summary["supportSource"])],
            [
                "TRANSLATE",
                translator["evidence"],
                reported["summary"]["translator"],
                cell(translator),
            ],
            ["REALIZE", summary["realization"], counts, cell(summary["realizationSource"])],
        ]
        rows += [
            ["CHECK", c["state"], c["field"], cell(c["source"])] for c in content["comparisons"]
        ]
        rows += [
            ["ISSUE", "-", issue["code"], "Computed/Unverifiable"] for issue in content["issues"]
        ]
        return rows
    source = report["sources"][0]
    rows = [
        ["REPORT", "api-version", "-", report["apiVersion"], "-"],
        ["REPORT", "kind", "-", report["kind"], "-"],
        ["SUBJECT", "namespace", "-", report["metadata"]["namespace"], "-"],
        ["SUBJECT", "name", "-", report["metadata"]["name"], "-"],
        ["REPORT", "collected-at", "-", report["collectedAt"], "-"],
        [
            "SOURCE",
            source["kind"],
            source["evidence"],
            f"{source['namespace']}/{source['name']} gen={source['generation']} at={source['collectedAt']}",
            f"{source['evidence']}/Current",
        ],
    ]
    counts = (
        f"routes={len(reported['routes'])} endpoints={len(reported['endpoints'])} "
        f"targets={len(reported['allocations'])}"
    )
    intent_source = cell(intent["source"])
    rows += [
        ["SUMMARY", "state", summary["state"], "-", cell(summary["source"])],
        ["SUMMARY", "intent", summary["intent"], "-", intent_source],
        ["SUMMARY", "support", summary["support"], "-", cell(summary["supportSource"])],
        [
            "SUMMARY",
            "realization",
            summary["realization"],
            counts,
            cell(summary["realizationSource"]),
        ],
        ["INTENT", "algorithm", intent["state"], intent["algorithm"], intent_source],
        [
            "INTENT",
            "consistent-hash",
            intent["consistentHash"]["state"],
            _feature(intent["consistentHash"]),
            intent_source,
        ],
        [
            "INTENT",
            "endpoint-override",
            intent["endpointOverride"]["state"],
            _feature(intent["endpointOverride"]),
            intent_source,
        ],
    ]
    rows += [
        ["EXTENSION", e["kind"], "Declared", str(e["count"]), intent_source]
        for e in intent["extensions"]
    ]
    rows += _reported_rows(reported)
    rows += [
        ["CHECK", c["field"], c["state"], "-", cell(c["source"])] for c in content["comparisons"]
    ]
    rows += [
        ["ISSUE", issue.get("component") or "-", "-", issue["code"], "Computed/Unverifiable"]
        for issue in content["issues"]
    ]
    rows += [["WARNING", "-", "-", w["code"], "Computed/Unverifiable"] for w in report["warnings"]]
    return rows


def explain_table(report: Value, *, wide: bool = False) -> str:
    headers = (
        ("LAYER", "FIELD", "STATE", "VALUE", "SOURCE")
        if wide
        else ("LAYER", "STATE", "VALUE", "SOURCE")
    )
    return render_table(headers, explain_rows(report, wide=wide))
