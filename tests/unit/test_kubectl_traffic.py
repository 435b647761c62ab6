"""`kubectl ome traffic status|explain`: OME's traffic reports of one InferenceService, against
golden files (`tests/unit/golden/kubectl/traffic-*`; `UPDATE_GOLDEN=1` rewrites them)."""

from __future__ import annotations

import copy
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ome_routing.kubectl.table import render_document
from ome_routing.kubectl.traffic_explain import project_explain
from ome_routing.kubectl.traffic_status import project_status
from ome_routing.kubectl.traffic_tables import (
    explain_rows,
    explain_table,
    status_rows,
    status_table,
)

GOLDEN = Path(__file__).parent / "golden" / "kubectl"
NOW = datetime(2026, 9, 14, 17, 0, tzinfo=UTC)
READY = {
    "type": "BackendPolicyReady",
    "status": "True",
    "reason": "AcceptedByGateway",
    "observedGeneration": 7,
    "lastTransitionTime": "2026-09-14T16:59:00Z",
}


def a_service(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "chat", "namespace": "prod", "uid": "uid-chat", "generation": 7},
        "spec": {
            "placement": {"policy": "ClusterAffinity", "mode": "All"},
            "traffic": {"algorithm": "RoundRobin"},
        },
        "status": status,
    }


def routed() -> dict[str, Any]:
    """A routed service as this project's controller leaves it: no status.traffic."""
    isvc = a_service(url="https://chat.prod.example.com/v1")
    del isvc["spec"]["traffic"]
    return isvc


def policy(conditions: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "algorithm": "RoundRobin",
        "backendPolicyResource": {
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "BackendTrafficPolicy",
            "name": "chat",
        },
        "targetedHTTPRoutes": ["chat"],
        "conditions": [READY] if conditions is None else conditions,
        **extra,
    }


def canarying() -> dict[str, Any]:
    """Envoy Gateway honors the policy; an engine canary at step 1 of 2 takes 20%."""
    isvc = a_service(
        traffic=policy(),
        addresses=[
            {"name": "external", "url": "https://Chat.Prod.Example.com/v1"},
            {"name": "cluster-local", "url": "http://chat.prod.svc.cluster.local"},
        ],
        canary={
            "currentStep": 0,
            "observedTrafficWeight": 20,
            "stableRevisionHash": "a1b2c3d4",
            "canaryRevisionHash": "e5f6a7b8",
        },
        components={
            "engine": {
                "latestRolledoutRevision": "chat-engine-rev-a1b2c3d4",
                "traffic": [
                    {"revisionName": "chat-engine-rev-a1b2c3d4", "percent": 80},
                    {
                        "revisionName": "chat-engine-rev-e5f6a7b8",
                        "percent": 20,
                        "latestRevision": True,
                    },
                ],
            }
        },
    )
    isvc["spec"]["rollout"] = {
        "groups": [
            {"components": ["engine"], "canary": {"steps": [{"traffic": 20}, {"traffic": 100}]}}
        ]
    }
    isvc["metadata"]["annotations"] = {"ome.io/retry-attempts": "3", "ome.io/retry-on": "5xx,reset"}
    return isvc


def malformed() -> dict[str, Any]:
    """A policy name that is not a name, a stale condition, weights that do not add up."""
    stale = {**READY, "observedGeneration": 6}
    isvc = a_service(
        traffic=policy([stale], algorithm="Fastest"),
        components={"engine": {"traffic": [{"revisionName": "other-rev-a1b2c3d4", "percent": 50}]}},
    )
    isvc["status"]["traffic"]["backendPolicyResource"]["name"] = "Not_A_Name"
    return isvc


CASES = {"routed": routed, "canarying": canarying, "malformed": malformed}


def render(report: dict[str, Any], output: str, table: Any) -> str:
    if output in ("json", "yaml"):
        return render_document(report, output)
    return str(table(report, wide=output == "wide"))


@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("verb", ["status", "explain"])
def test_each_output_matches_its_golden_file(verb: str, case: str, output: str) -> None:
    if verb == "status":
        text = render(project_status(CASES[case](), NOW), output, status_table)
    else:
        text = render(project_explain(CASES[case](), NOW), output, explain_table)
    path = GOLDEN / f"traffic-{verb}-{case}.{output}.golden"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def column(rows: list[list[str]], first: str, index: int = 2) -> list[str]:
    return [row[index] for row in rows if row[0] == first]


class TestStatus:
    def test_a_service_without_traffic_status_is_unavailable_not_an_error(self) -> None:
        report = project_status(routed(), NOW)
        assert report["content"]["summary"]["state"] == "Unavailable"
        assert report["content"]["issues"] == [{"code": "TrafficStatusMissing"}]
        assert report["content"]["endpoints"] == [
            {
                "url": "https://chat.prod.example.com/v1",
                "source": {"evidence": "Reported", "freshness": "Unverifiable"},
            }
        ]

    def test_the_canary_names_stable_and_canary_revisions(self) -> None:
        rows = status_rows(project_status(canarying(), NOW)["content"], wide=False)
        assert column(rows, "CANARY") == ["1/2 @ 20%"]
        assert column(rows, "WEIGHT") == ["stable:a1b2c3d4=80%", "canary:e5f6a7b8=20%"]
        assert column(rows, "STATE") == ["Reported"]

    def test_addresses_are_sanitized_and_sorted(self) -> None:
        report = project_status(canarying(), NOW)
        assert [e["url"] for e in report["content"]["endpoints"]] == [
            "http://chat.prod.svc.cluster.local",
            "https://chat.prod.example.com/v1",
        ]

    def test_an_address_with_credentials_or_a_query_is_an_issue_not_shown(self) -> None:
        isvc = a_service(
            addresses=[
                {"url": "https://user:pw@chat.example.com/"},
                {"url": "https://chat.example.com/?k=v"},
            ]
        )
        report = project_status(isvc, NOW)
        assert report["content"]["endpoints"] == []
        assert {"code": "EndpointInvalid"} in report["content"]["issues"]
        assert "pw" not in render_document(report, "json")

    def test_malformed_evidence_is_invalid_with_its_issues(self) -> None:
        report = project_status(malformed(), NOW)
        assert report["content"]["summary"]["state"] == "Invalid"
        codes = [(i["code"], i.get("component", "")) for i in report["content"]["issues"]]
        assert codes == [
            ("AllocationInvalid", "engine"),
            ("AlgorithmInvalid", ""),
            ("PolicyReferenceInvalid", ""),
            ("StatusCombinationInvalid", ""),
        ]
        assert [w["code"] for w in report["warnings"]] == ["PartialData", "StaleEvidence"]

    def test_more_than_four_routes_are_truncated(self) -> None:
        isvc = a_service(traffic=policy(targetedHTTPRoutes=[f"route-{i}" for i in range(6)]))
        report = project_status(isvc, NOW)
        assert len(report["content"]["routes"]) == 4
        assert report["content"]["summary"]["state"] == "Partial"
        assert [w["code"] for w in report["warnings"]] == ["PartialData", "Truncated"]

    def test_two_conditions_of_one_type_conflict(self) -> None:
        other = {**READY, "reason": "Pending", "status": "Unknown"}
        report = project_status(a_service(traffic=policy([READY, other])), NOW)
        assert {"code": "ConditionConflict"} in report["content"]["issues"]

    def test_no_message_or_uid_is_reported_beyond_the_source(self) -> None:
        isvc = a_service(traffic=policy([{**READY, "message": "secret detail"}]))
        text = render_document(project_status(isvc, NOW), "json")
        assert "secret detail" not in text
        assert text.count("uid-chat") == 1


class TestExplain:
    def test_no_declared_traffic_is_no_intent(self) -> None:
        report = project_explain(routed(), NOW)
        assert report["content"]["summary"]["state"] == "NoIntent"
        assert report["content"]["summary"]["source"] == {
            "evidence": "Computed",
            "freshness": "Current",
        }

    def test_a_declared_algorithm_without_traffic_status_is_unavailable(self) -> None:
        report = project_explain(a_service(), NOW)
        rows = explain_rows(report, wide=False)
        assert rows[0] == ["SUMMARY", "Unavailable", "-", "Computed/Unavailable"]
        assert column(rows, "ISSUE") == ["IntentNotReported", "RealizationUnavailable"]
        assert report["warnings"] == [{"code": "SourceUnavailable"}]

    def test_an_honored_policy_is_consistent(self) -> None:
        rows = explain_rows(project_explain(a_service(traffic=policy()), NOW), wide=False)
        assert rows[:5] == [
            ["SUMMARY", "Consistent", "-", "Computed/Current"],
            ["INTENT", "Declared", "RoundRobin", "Declared/Current"],
            ["SUPPORT", "Honored", "-", "Computed/Current"],
            ["TRANSLATE", "Computed", "envoy-gateway", "Computed/Current"],
            ["REALIZE", "Reported", "r=1 e=0 w=0", "Reported/Current"],
        ]

    def test_no_translator_is_unsupported(self) -> None:
        ready = {**READY, "status": "False", "reason": "NoTranslatorAvailable"}
        isvc = a_service(traffic={"algorithm": "RoundRobin", "conditions": [ready]})
        report = project_explain(isvc, NOW)
        wide = explain_rows(report, wide=True)
        assert ["REPORTED", "translator", "Computed", "Unavailable", "Computed/Current"] in wide
        assert report["content"]["summary"]["state"] == "Unsupported"
        assert [i["code"] for i in report["content"]["issues"]] == [
            "NoTranslatorAvailable",
            "RealizationUnavailable",
        ]

    @pytest.mark.parametrize(
        ("annotations", "traffic"),
        [
            ({"ome.io/retry-attempts": "3"}, None),
            ({"ome.io/timeout-idle": "soon"}, None),
            ({"ome.io/retry-on": "5xx,sometimes"}, None),
            ({"ome.io/btp.": "x"}, None),
            ({}, {"algorithm": "ConsistentHash"}),
            ({}, {"algorithm": "RoundRobin", "endpointOverride": {"type": "Header"}}),
        ],
    )
    def test_invalid_declarations_make_the_intent_invalid(
        self, annotations: dict[str, str], traffic: dict[str, Any] | None
    ) -> None:
        isvc = a_service(traffic=policy())
        isvc["metadata"]["annotations"] = annotations
        if traffic is not None:
            isvc["spec"]["traffic"] = traffic
        report = project_explain(isvc, NOW)
        assert report["content"]["intent"]["state"] == "Invalid"
        assert report["content"]["summary"]["state"] == "Invalid"

    def test_extensions_are_counted_never_copied(self) -> None:
        report = project_explain(canarying(), NOW)
        assert report["content"]["intent"]["extensions"] == [{"kind": "Retry", "count": 2}]
        assert "5xx" not in render_document(report, "json")

    def test_header_names_are_counted(self) -> None:
        isvc = a_service(traffic=policy())
        isvc["spec"]["traffic"] = {
            "algorithm": "RoundRobin",
            "endpointOverride": {"type": "Header", "headers": [{"name": "X-Session-Token"}]},
        }
        report = project_explain(isvc, NOW)
        assert report["content"]["intent"]["endpointOverride"] == {
            "state": "Declared",
            "variant": "Header",
            "inputCount": 1,
        }
        assert "X-Session-Token" not in json.dumps(report)

    def test_the_canary_weight_check_matches_a_valid_canary(self) -> None:
        comparisons = project_explain(canarying(), NOW)["content"]["comparisons"]
        assert comparisons[2] == {
            "field": "canary-weight",
            "state": "Match",
            "source": {"evidence": "Computed", "freshness": "Unverifiable"},
        }

    def test_the_report_does_not_carry_the_uid(self) -> None:
        report = project_explain(copy.deepcopy(canarying()), NOW)
        assert "uid" not in report["sources"][0]
