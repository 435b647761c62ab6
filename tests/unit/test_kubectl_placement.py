"""`kubectl ome placement endpoint`: OME's report, whole, in every output, against golden files.

The golden files (`tests/unit/golden/kubectl/`) were checked row by row against OME's
`placementEndpointTable` and its JSON types; `UPDATE_GOLDEN=1` rewrites them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubectl_builders import (
    DIGEST,
    NOW,
    a_condition,
    a_trafficmap,
    an_entry,
    an_isvc,
)

from ome_routing.kubectl import placement
from ome_routing.kubectl.table import render_document

GOLDEN = Path(__file__).parent / "golden" / "kubectl"
HOMES = ("worker-a", "worker-b", "worker-c", "worker-d", "worker-e")


def several_homes() -> dict[str, Any]:
    """Five homes: one drained, one falling back, one gated by its probe, one with a future
    probe, one with a malformed digest; a gateway, and an acknowledged publication."""
    isvc = an_isvc(homes=HOMES)
    tmap = a_trafficmap(
        an_entry("worker-a", 0, drainRefs=["maintenance-a"]),
        an_entry(
            "worker-b",
            2,
            capacity={
                "allocated": 2,
                "ready": 1,
                "source": "ControlPlane",
                "factor": "1.5",
                "fallbackReason": "capacity endpoint returned HTTP 404",
            },
            probe={
                "result": "Passing",
                "policyDigest": DIGEST,
                "lastProbeTime": "2026-09-15T11:59:50Z",
            },
        ),
        an_entry(
            "worker-c",
            0,
            healthy=False,
            capacity={"allocated": 1, "ready": 1, "source": "Endpoint", "reported": 1},
            probe={
                "result": "Failing",
                "gated": True,
                "consecutiveFailures": 3,
                "policyDigest": DIGEST,
                "lastProbeTime": "2026-09-15T11:59:55Z",
                "message": "GET /healthz: HTTP 503",
            },
        ),
        an_entry(
            "worker-d", 1, probe={"result": "Passing", "lastProbeTime": "2026-09-15T12:05:00Z"}
        ),
        an_entry("worker-e", 1, probe={"result": "Unknown", "policyDigest": "sha256:short"}),
        conditions=[
            a_condition("Routable", "True", "Routable"),
            a_condition("OverrideActive", "True", "OverridesApplied"),
            a_condition("CapacityFallback", "True", "EndpointCapacityUnavailable"),
            a_condition("Published", "True", "Published"),
        ],
    )
    return placement.endpoint_report(isvc, tmap, placement.acquired(), NOW)


def missing_map() -> dict[str, Any]:
    return placement.endpoint_report(an_isvc(), None, placement.unavailable("NotFound"), NOW)


def foreign_map() -> dict[str, Any]:
    """A TrafficMap of the same name that another InferenceService (another UID) owns."""
    tmap = a_trafficmap(an_entry("worker-a"), owner_uid="0b8e9c1a-1111-4000-8000-00000000dead")
    return placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)


def malformed_conditions() -> dict[str, Any]:
    """A transition in the future, a reason OME does not list, a message over 4096 bytes,
    and a condition recorded for an older generation."""
    tmap = a_trafficmap(
        an_entry("worker-a"),
        an_entry("worker-b"),
        conditions=[
            a_condition("Routable", "True", "Routable", 3),
            a_condition("OverrideActive", "False", "NoOverrides", stamp="2026-09-15T13:00:00Z"),
            {
                **a_condition("CapacityFallback", "False", "CapacityPollingDisabled"),
                "message": "x" * 4097,
            },
            a_condition("Published", "False", "Transitioning"),
        ],
    )
    return placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)


CASES = {
    "several-homes": several_homes,
    "missing-map": missing_map,
    "foreign-map": foreign_map,
    "malformed-conditions": malformed_conditions,
}


def render(report: dict[str, Any], output: str) -> str:
    if output in ("json", "yaml"):
        return render_document(report, output)
    return placement.format_endpoint_table(report, wide=output == "wide")


@pytest.mark.parametrize("output", ["table", "wide", "json", "yaml"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_output_matches_its_golden_file(case: str, output: str) -> None:
    text = render(CASES[case](), output)
    path = GOLDEN / f"{case}.{output}.golden"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def rows(report: dict[str, Any], *, wide: bool = False) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for field, value in placement.endpoint_rows(report, wide=wide):
        out.setdefault(field, []).append(value)
    return out


class TestMissingMap:
    def test_reports_omes_no_map_values(self) -> None:
        report = missing_map()
        routing = report["content"]["routing"]
        assert routing["acquisition"] == {
            "state": "Unavailable",
            "reason": "NotFound",
            "returned": 0,
            "admitted": 0,
            "pages": 0,
            "complete": False,
            "truncated": False,
        }
        assert routing["source"] == {
            "evidence": "Unavailable",
            "freshness": "Unavailable",
            "reason": "NotFound",
        }
        assert routing["acknowledgement"] == "NoAcknowledgement"
        assert report["sources"][1] == {
            "kind": "TrafficMap",
            "namespace": "prod",
            "name": "chat",
            "evidence": "Unavailable",
            "collectedAt": "2026-09-15T12:00:00Z",
            "unavailableReason": "NotFound",
        }

    @pytest.mark.parametrize(
        ("reason", "source_reason"),
        [
            ("Forbidden", "Forbidden"),
            ("Timeout", "Unreadable"),
            ("Cancelled", "Unreadable"),
            ("UnsupportedAPI", "UnsupportedAPI"),
            ("Unreadable", "Unreadable"),
        ],
    )
    def test_any_failed_read_is_a_state_with_its_reason(
        self, reason: str, source_reason: str
    ) -> None:
        report = placement.endpoint_report(an_isvc(), None, placement.unavailable(reason), NOW)
        assert rows(report)["TrafficMap reason"] == [reason]
        assert report["sources"][1]["unavailableReason"] == source_reason

    def test_a_map_that_does_not_decode_is_unreadable(self) -> None:
        tmap = a_trafficmap(an_entry("worker-a"))
        tmap["spec"]["entries"][0]["weight"] = "heavy"
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        assert report["content"]["routing"]["acquisition"]["reason"] == "Unreadable"


class TestOwnership:
    def test_a_foreign_map_is_unbound_and_none_of_it_is_shown(self) -> None:
        report = foreign_map()
        routing = report["content"]["routing"]
        assert routing["acquisition"] == {
            "state": "Unavailable",
            "reason": "OwnershipUnbound",
            "returned": 1,
            "admitted": 0,
            "pages": 1,
            "complete": False,
            "truncated": False,
        }
        assert report["content"]["entries"] == []
        assert report["sources"][1]["unavailableReason"] == "MalformedPayload"

    @pytest.mark.parametrize(
        "change",
        [
            pytest.param(lambda m: m["spec"].update(service="other"), id="another-service"),
            pytest.param(
                lambda m: m["metadata"].update(deletionTimestamp="2026-09-15T11:00:00Z"),
                id="deleting",
            ),
            pytest.param(
                lambda m: m["metadata"]["ownerReferences"][0].update(controller=False),
                id="no-controller",
            ),
            pytest.param(
                lambda m: m["metadata"]["ownerReferences"][0].update(apiVersion="other.io/v1"),
                id="other-group",
            ),
            pytest.param(
                lambda m: m["metadata"]["ownerReferences"].append(
                    {**m["metadata"]["ownerReferences"][0], "name": "second"}
                ),
                id="two-controllers",
            ),
        ],
    )
    def test_every_broken_binding_is_unbound(self, change: Any) -> None:
        tmap = a_trafficmap(an_entry("worker-a"))
        change(tmap)
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        assert report["content"]["routing"]["acquisition"]["reason"] == "OwnershipUnbound"

    def test_any_version_of_the_ome_group_binds(self) -> None:
        tmap = a_trafficmap(an_entry("worker-a"))
        tmap["metadata"]["ownerReferences"][0]["apiVersion"] = "ome.io/v1alpha9"
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        assert report["content"]["routing"]["acquisition"]["state"] == "Observed"


class TestReportValues:
    def test_no_full_url_or_message_is_reported(self) -> None:
        for output in ("table", "wide", "json", "yaml"):
            text = render(several_homes(), output)
            assert "/v1" not in text.replace("/v1alpha1", "")
            assert "HTTP 503" not in text and "HTTP 404" not in text
            assert "is True" not in text

    def test_json_is_the_envelope_in_omes_key_order(self) -> None:
        report = json.loads(render(several_homes(), "json"))
        assert list(report) == [
            "apiVersion",
            "kind",
            "metadata",
            "collectedAt",
            "sources",
            "content",
            "warnings",
        ]
        assert list(report["content"]) == [
            "status",
            "routing",
            "entries",
            "conditions",
            "conditionPreview",
            "issues",
        ]
        assert report["warnings"] == []

    def test_yaml_sorts_keys_as_go_does(self) -> None:
        text = render(missing_map(), "yaml")
        assert text.startswith(
            'apiVersion: cli.ome.io/v1alpha1\ncollectedAt: "2026-09-15T12:00:00Z"\n'
        )
        assert yaml.safe_load(text) == json.loads(render(missing_map(), "json"))

    def test_five_homes_show_a_route_preview_of_four(self) -> None:
        table = rows(several_homes())
        assert table["Route preview"] == ["4/5; use -o wide or json"]
        assert table["Route home"] == ["worker-a", "worker-b", "worker-c", "worker-d"]
        assert rows(several_homes(), wide=True)["Route home"] == list(HOMES)

    def test_a_future_probe_and_a_malformed_digest_are_invalid_issues(self) -> None:
        report = several_homes()
        entries = {entry["cluster"]: entry for entry in report["content"]["entries"]}
        assert entries["worker-d"]["probe"]["result"] == "Invalid"
        assert entries["worker-e"]["probe"]["source"]["reason"] == "MalformedPayload"
        assert report["content"]["routing"]["probePreview"]["state"] == "Unavailable"
        assert report["content"]["issues"] == [
            {"group": "RecordedProbes", "code": "FutureObservationTime", "count": 1},
            {"group": "RecordedProbes", "code": "MalformedPayload", "count": 1},
        ]

    def test_an_empty_probe_result_is_unknown(self) -> None:
        tmap = a_trafficmap(an_entry("worker-a", probe={"gated": False}))
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        assert report["content"]["entries"][0]["probe"]["result"] == "Unknown"

    @pytest.mark.parametrize(
        "entry",
        [
            pytest.param(an_entry("worker-a", weight=1_000_001), id="weight-over-a-million"),
            pytest.param(an_entry("Worker_A"), id="cluster-not-a-name"),
            pytest.param(an_entry("worker-a", endpoint="ftp://worker-a"), id="endpoint-not-http"),
            pytest.param(an_entry("worker-a", probe={"result": "Maybe"}), id="probe-result"),
            pytest.param(
                an_entry("worker-a", capacity={"allocated": 1, "ready": 1, "factor": "0"}),
                id="factor-zero",
            ),
            pytest.param(an_entry("worker-a", probe={"message": "x" * 4097}), id="probe-message"),
        ],
    )
    def test_one_malformed_entry_hides_them_all(self, entry: dict[str, Any]) -> None:
        tmap = a_trafficmap(an_entry("worker-b"), entry)
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        assert report["content"]["entries"] == []
        assert report["content"]["routing"]["entryPreview"]["state"] == "MalformedPayload"

    def test_differing_duplicate_entries_conflict(self) -> None:
        tmap = a_trafficmap(an_entry("worker-a", 1), an_entry("worker-a", 2))
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        assert report["content"]["routing"]["entryPreview"]["state"] == "ConflictingDuplicates"

    def test_duplicates_differing_only_in_drains_keep_the_entry_with_conflicting_drains(
        self,
    ) -> None:
        tmap = a_trafficmap(
            an_entry("worker-a", drainRefs=["a"]), an_entry("worker-a", drainRefs=["b"])
        )
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        (entry,) = report["content"]["entries"]
        assert entry["drainPreview"]["state"] == "ConflictingDuplicates"
        assert rows(report)["Route evidence"] == [
            "drains=ConflictingDuplicates; gate=NotRecorded; fallback=NotRecorded"
        ]

    @pytest.mark.parametrize(
        "refs",
        [
            pytest.param(["a", "a"], id="repeated"),
            pytest.param(["https://user:pass@example.com/x"], id="credentials"),
            pytest.param([" padded"], id="untrimmed"),
            pytest.param(["x" * 129], id="too-long"),
        ],
    )
    def test_malformed_drain_refs_are_counted_not_shown(self, refs: list[str]) -> None:
        tmap = a_trafficmap(an_entry("worker-a", drainRefs=refs))
        report = placement.endpoint_report(an_isvc(), tmap, placement.acquired(), NOW)
        assert report["content"]["entries"][0]["drainRefs"] == []
        assert {"group": "DrainRefs", "code": "MalformedPayload", "count": 1} in report["content"][
            "issues"
        ]

    def test_split_mode_counts_admitted_and_ready_replicas(self) -> None:
        report = placement.endpoint_report(
            an_isvc(mode="Split"), None, placement.unavailable("NotFound"), NOW
        )
        home = report["content"]["status"]["placement"]["homes"][0]
        assert home["admittedReplicas"] == {"value": 2, "state": "Reported"}
        report = placement.endpoint_report(
            an_isvc(mode="All"), None, placement.unavailable("NotFound"), NOW
        )
        assert report["content"]["status"]["placement"]["homes"][0]["admittedReplicas"] == {
            "state": "NotApplicable"
        }

    def test_an_unknown_phase_is_an_issue_row(self) -> None:
        isvc = an_isvc()
        isvc["status"]["placement"]["phase"] = "Exploding"
        report = placement.endpoint_report(isvc, None, placement.unavailable("NotFound"), NOW)
        table = rows(report)
        assert table["Placement"] == ["Unknown (reported)"]
        assert table["Issue"] == ["PlacementPhase: UnknownValue (1)"]

    def test_an_inferenceservice_that_does_not_decode_fails_the_command(self) -> None:
        isvc = an_isvc()
        isvc["status"]["url"] = "http://bad host/"
        with pytest.raises(
            placement.PlacementError, match=r"^InferenceService read unavailable: Unreadable$"
        ):
            placement.endpoint_report(isvc, None, placement.unavailable("NotFound"), NOW)

    def test_an_inferenceservice_without_uid_fails_the_command(self) -> None:
        isvc = an_isvc()
        del isvc["metadata"]["uid"]
        with pytest.raises(placement.PlacementError, match="valid identity-bound InferenceService"):
            placement.endpoint_report(isvc, None, placement.unavailable("NotFound"), NOW)
