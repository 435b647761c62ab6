"""`kubectl ome`: the pure reports, tables and checks behind the plugin."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from tm_builders import a_home, a_map

from ome_routing.core import capacity, report
from ome_routing.core.conditions import merge_conditions
from ome_routing.core.drains import ALREADY_EXISTS, ANNOTATION, DOES_NOT_EXIST, parse_drains
from ome_routing.core.durations import parse_duration
from ome_routing.core.trafficmap import PollingState, build_trafficmap, entries_to_json
from ome_routing.kubectl import actions
from ome_routing.kubectl.fallback import MEANINGS, FallbackCode, codes_help, fallback_code
from ome_routing.kubectl.placement import (
    condition_freshness,
    endpoint_origin,
    endpoint_report,
    endpoint_rows,
    format_endpoint_table,
)
from ome_routing.kubectl.table import cut, render_document, render_fields
from ome_routing.observer import failures

NOW = datetime(2026, 9, 28, 10, 0, 0, tzinfo=UTC)


# --- builders ---------------------------------------------------------------------------


def a_trafficmap(*homes: Any, generation: int = 3, **map_options: Any) -> dict[str, Any]:
    """A TrafficMap as the controller writes it, built by the core from `tm_builders` homes."""
    view = build_trafficmap(a_map(*homes, **map_options))
    tmap = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {
            "name": "qwen3-0-6b",
            "namespace": "qwen3-0-6b",
            "uid": "7c1d0c1e-0000-4000-8000-000000000001",
            "generation": generation,
        },
        "spec": {
            "service": "qwen3-0-6b",
            "mode": "All",
            "observedISVCGeneration": 1,
            "entries": entries_to_json(view),
        },
        "status": {"conditions": merge_conditions([], view.conditions, NOW, generation)},
    }
    return dict(json.loads(json.dumps(tmap)))  # as the API server returns it: plain JSON


def rows_of(tmap: dict[str, Any], *, wide: bool = False) -> list[tuple[str, str]]:
    return endpoint_rows(endpoint_report(tmap, NOW), wide=wide)


def values(rows: list[tuple[str, str]], field: str) -> list[str]:
    return [value for name, value in rows if name == field]


def an_isvc(
    *,
    drains: str | None = None,
    placement: bool = True,
    labels: dict[str, str] | None = None,
    deleting: bool = False,
    uid: str | None = "2f6c1d9e-4b7a-4c1e-9f3d-8a5b6c7d0e12",
    version: str | None = "1284711",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "chat", "namespace": "prod", "labels": labels or {}}
    if uid is not None:
        meta["uid"] = uid
    if version is not None:
        meta["resourceVersion"] = version
    if drains is not None:
        meta["annotations"] = {ANNOTATION: drains, "team": "serving"}
    if deleting:
        meta["deletionTimestamp"] = "2026-09-28T10:00:00Z"
    spec: dict[str, Any] = {"model": {"name": "chat"}}
    if placement:
        spec["placement"] = {"mode": "All"}
    return {"metadata": meta, "spec": spec}


def a_request(action: str = actions.DRAIN, **overrides: Any) -> actions.ActionRequest:
    flags: dict[str, Any] = {
        "namespace": "prod",
        "context": "hub",
        "drain_id": "maintenance-a",
        "cluster": "worker-a",
        "reason": "planned maintenance",
    }
    flags.update(overrides)
    names = flags.pop("names", ("chat",))
    return actions.check_request(action, names, **flags)


MAINTENANCE_A = '{"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'


# --- fallback codes ---------------------------------------------------------------------

#: OME's classifier table (`kubectl ome placement endpoint`, v1.3), one row per reason.
OME_FALLBACK_TABLE = [
    ("", FallbackCode.NOT_RECORDED),
    ("no capacity report yet", FallbackCode.NO_REPORT),
    ("capacity target is invalid: no host in endpoint", FallbackCode.INVALID_TARGET),
    ("capacity clock is not configured", FallbackCode.CLOCK_UNAVAILABLE),
    ("capacity observer executor is not configured", FallbackCode.OBSERVER_UNAVAILABLE),
    ("capacity observation could not be submitted: stopped", FallbackCode.OBSERVER_UNAVAILABLE),
    ("capacity endpoint unreachable: connection refused", FallbackCode.UNREACHABLE),
    ("capacity endpoint returned HTTP 404", FallbackCode.HTTP_ERROR),
    ("capacity endpoint returned HTTP 503", FallbackCode.HTTP_ERROR),
    (
        "reading capacity response: response exceeds configured limit of 65536 bytes",
        FallbackCode.RESPONSE_READ_ERROR,
    ),
    ("capacity request did not complete: timed out after 3s", FallbackCode.REQUEST_INCOMPLETE),
    ("capacity report is negative (-1)", FallbackCode.INVALID_REPORT),
    ("capacity report timestamp is in the future", FallbackCode.INVALID_REPORT),
    (
        "capacity report is stale (at least configured maximum age 40s)",
        FallbackCode.STALE_REPORT,
    ),
    ("capacity report awaiting quorum (1/3 accepted samples)", FallbackCode.AWAITING_QUORUM),
    (
        "capacity report awaiting quorum after stale samples expired (2/3 accepted samples)",
        FallbackCode.AWAITING_QUORUM,
    ),
    (
        "capacity response is not a valid report: unexpected end of JSON input",
        FallbackCode.OTHER,
    ),
    ("capacity report has no servable count", FallbackCode.OTHER),
    ("capacity report has no observedAt stamp", FallbackCode.OTHER),
    ("capacity request URL is invalid: parse error", FallbackCode.OTHER),
    ("capacity report unavailable", FallbackCode.OTHER),
    ("a reason a newer controller writes", FallbackCode.OTHER),
    ("capacity endpoint returned HTTP" + "404", FallbackCode.OTHER),  # no space: not OME's prefix
]

#: Reasons OME's CLI refuses to classify: over 4096 bytes, not UTF-8, control characters.
MALFORMED_REASONS = [
    pytest.param("capacity endpoint unreachable: " + "x" * 4066, id="4097-bytes"),
    pytest.param("capacity endpoint unreachable: " + "é" * 2033, id="4097-bytes-in-2064-chars"),
    pytest.param("capacity endpoint unreachable: \udcff", id="lone-surrogate"),
    pytest.param(b"capacity endpoint unreachable: \xff", id="invalid-utf8-bytes"),
    pytest.param("capacity endpoint returned HTTP 404\nInjected   row", id="line-break"),
    pytest.param("capacity report is stale (\x1b[2J)", id="escape"),
    pytest.param("no capacity report yet\x7f", id="delete"),
    pytest.param("capacity endpoint unreachable: \x85", id="c1-control"),
    pytest.param("capacity endpoint unreachable: \t", id="tab"),
]

#: This project's reason writers, each with the code its text must get.
PROJECT_REASONS = [
    (capacity.NO_REPORT_YET, FallbackCode.NO_REPORT),
    (capacity.awaiting_quorum_reason(1, 3), FallbackCode.AWAITING_QUORUM),
    (capacity.expired_reason(2, 3), FallbackCode.AWAITING_QUORUM),
    (report.stale_reason(parse_duration("40s")), FallbackCode.STALE_REPORT),
    (report.FUTURE, FallbackCode.INVALID_REPORT),
    (report.negative_reason(-1), FallbackCode.INVALID_REPORT),
    (report.INVALID_PREFIX + "empty body", FallbackCode.OTHER),
    (report.NO_SERVABLE, FallbackCode.OTHER),
    (report.NO_OBSERVED_AT, FallbackCode.OTHER),
    (failures.unreachable("connection refused").reason, FallbackCode.UNREACHABLE),
    (
        failures.unreachable(failures.timed_out(parse_duration("3s"))).reason,
        FallbackCode.UNREACHABLE,
    ),
    (failures.http_status(404).reason, FallbackCode.HTTP_ERROR),
    (failures.too_large(65536).reason, FallbackCode.RESPONSE_READ_ERROR),
    (failures.reading_failed("connection reset").reason, FallbackCode.RESPONSE_READ_ERROR),
    (failures.incomplete("timed out after 3s").reason, FallbackCode.REQUEST_INCOMPLETE),
    (failures.invalid_target("no host").reason, FallbackCode.INVALID_TARGET),
    (failures.invalid_url("http://[").reason, FallbackCode.OTHER),
    (failures.unbuildable("bad method").reason, FallbackCode.OTHER),
    (failures.not_submitted("observer stopped").reason, FallbackCode.OBSERVER_UNAVAILABLE),
]


class TestFallbackCodes:
    @pytest.mark.parametrize(("reason", "code"), OME_FALLBACK_TABLE)
    def test_each_row_of_omes_table_gets_its_code(self, reason: str, code: FallbackCode) -> None:
        assert fallback_code(reason) is code

    @pytest.mark.parametrize("reason", MALFORMED_REASONS)
    def test_a_reason_too_long_not_utf8_or_with_control_characters_is_malformed(
        self, reason: str | bytes
    ) -> None:
        assert fallback_code(reason) is FallbackCode.MALFORMED_PAYLOAD

    def test_a_reason_of_exactly_4096_bytes_is_classified(self) -> None:
        reason = "capacity endpoint unreachable: " + "x" * 4065
        assert len(reason.encode()) == 4096
        assert fallback_code(reason) is FallbackCode.UNREACHABLE

    @pytest.mark.parametrize(("reason", "code"), PROJECT_REASONS)
    def test_the_reasons_this_project_writes_get_omes_codes(
        self, reason: str, code: FallbackCode
    ) -> None:
        assert fallback_code(reason) is code

    def test_every_poll_outcome_is_among_the_project_reasons(self) -> None:
        """The writer table above covers every way a poll fails, so a new one gets a row."""
        covered = {
            failures.unreachable("x").outcome,
            failures.http_status(500).outcome,
            failures.too_large(1).outcome,
            failures.incomplete("x").outcome,
            failures.invalid_target("x").outcome,
            failures.not_submitted("x").outcome,
            failures.Outcome.STALE,
            failures.Outcome.FUTURE,
            failures.Outcome.INVALID_REPORT,
        }
        assert covered == {o for o in failures.Outcome if o is not failures.Outcome.OK}

    def test_no_reason_is_not_recorded(self) -> None:
        assert fallback_code(None) is FallbackCode.NOT_RECORDED

    def test_a_reason_that_is_not_text_is_malformed(self) -> None:
        assert fallback_code(42) is FallbackCode.MALFORMED_PAYLOAD

    def test_every_code_is_explained_in_help(self) -> None:
        assert set(MEANINGS) == set(FallbackCode)
        for code in FallbackCode:
            assert f"{code.value}: " in codes_help()


# --- placement endpoint -----------------------------------------------------------------


class TestEndpointTable:
    def test_spec_step_3_example_shows_weights_and_available_capacity(self) -> None:
        """worker-a reports 3 and worker-b 1, both with two ready replicas: weights 2 and 1."""
        tmap = a_trafficmap(a_home("worker-a", reports=3), a_home("worker-b", reports=1))
        rows = rows_of(tmap)
        assert values(rows, "Capacity fallback") == ["False: EndpointCapacityAvailable (Current)"]
        assert values(rows, "Route home") == ["worker-a", "worker-b"]
        assert values(rows, "Final weight") == ["2; healthy=true", "1; healthy=true"]
        assert values(rows, "Route evidence") == [
            "drains=0; gate=NotRecorded; fallback=NotRecorded",
            "drains=0; gate=NotRecorded; fallback=NotRecorded",
        ]
        assert "Capacity provenance" not in dict(rows)

    def test_wide_adds_capacity_source_and_counts(self) -> None:
        tmap = a_trafficmap(a_home("worker-a", reports=3), a_home("worker-b", reports=1))
        rows = rows_of(tmap, wide=True)
        assert values(rows, "Capacity provenance") == ["ControlPlane", "Endpoint"]
        assert values(rows, "Allocated count") == ["2 (Reported)", "1 (Reported)"]
        assert values(rows, "Ready count") == ["2 (Reported)", "2 (Reported)"]
        assert values(rows, "Reported capacity") == ["3", "1"]

    def test_a_home_that_falls_back_shows_its_code_and_the_condition_its_reason(self) -> None:
        tmap = a_trafficmap(
            a_home("worker-a", reports=3),
            a_home("worker-b", fallback="capacity endpoint returned HTTP 404"),
        )
        rows = rows_of(tmap, wide=True)
        assert values(rows, "Capacity fallback") == ["True: EndpointCapacityUnavailable (Current)"]
        assert values(rows, "Route evidence")[1] == "drains=0; gate=NotRecorded; fallback=HTTPError"
        assert values(rows, "Home cap fallback") == ["NotRecorded", "HTTPError"]
        assert values(rows, "Reported capacity")[1] == "NotRecorded"

    def test_a_drained_home_shows_weight_zero_and_its_drain(self) -> None:
        tmap = a_trafficmap(
            a_home("worker-a", reports=2),
            a_home("worker-b", reports=2),
            drains={"maintenance-a": "worker-a"},
        )
        rows = rows_of(tmap, wide=True)
        assert values(rows, "Traffic override") == ["True: OverridesApplied (Current)"]
        assert values(rows, "Final weight")[0] == "0; healthy=true"
        assert (
            values(rows, "Route evidence")[0] == "drains=1; gate=NotRecorded; fallback=NotRecorded"
        )
        assert values(rows, "Drain refs") == ["maintenance-a", "Validated"]

    def test_polling_disabled_shows_its_reason(self) -> None:
        tmap = a_trafficmap(a_home("worker-a", polled=False), polling=PollingState.DISABLED)
        assert values(rows_of(tmap), "Capacity fallback") == [
            "False: CapacityPollingDisabled (Current)"
        ]

    def test_a_condition_the_map_lacks_reads_not_recorded(self) -> None:
        tmap = a_trafficmap(a_home("worker-a", reports=2))
        assert values(rows_of(tmap), "Published") == ["Unknown: NotRecorded (Unverifiable)"]

    def test_the_table_starts_with_its_header_and_aligns_values(self) -> None:
        tmap = a_trafficmap(a_home("worker-a", reports=2))
        lines = format_endpoint_table(endpoint_report(tmap, NOW)).splitlines()
        assert lines[0].split() == ["FIELD", "VALUE"]
        assert lines[1].startswith("TrafficMap ") and lines[1].endswith("qwen3-0-6b/qwen3-0-6b")
        column = lines[0].index("VALUE")
        assert all(line[column - 1] == " " for line in lines[1:])

    @pytest.mark.parametrize(
        ("reason", "code"),
        [
            (
                "capacity endpoint unreachable: GET http://user:token@reporter.invalid",
                "Unreachable",
            ),
            ("capacity endpoint returned HTTP 503 from the-private-host", "HTTPError"),
            ("a reason from the-private-host", "OtherReportedReason"),
            ("the-private-host\nInjected   row", "MalformedPayload"),
        ],
    )
    def test_no_output_prints_the_reason_itself_only_its_code(self, reason: str, code: str) -> None:
        """The reason can hold a reporter's words or a URL's credentials; OME prints the code."""
        tmap = a_trafficmap(a_home("worker-a", fallback=reason))
        document = endpoint_report(tmap, NOW)
        outputs = {
            "table": format_endpoint_table(document),
            "wide": format_endpoint_table(document, wide=True),
            "json": render_document(document, "json"),
            "yaml": render_document(document, "yaml"),
        }
        for name, text in outputs.items():
            assert "private" not in text and "token" not in text, name
        for output, load in (("json", json.loads), ("yaml", yaml.safe_load)):
            loaded = load(outputs[output])
            assert loaded["kind"] == "PlacementEndpointReport"
            assert loaded["collectedAt"] == "2026-09-28T10:00:00Z"
            assert loaded["homes"][0]["capacity"]["fallbackReason"] == code

    def test_a_malformed_reason_is_counted_as_an_issue(self) -> None:
        tmap = a_trafficmap(
            a_home("worker-a", fallback="capacity endpoint unreachable: " + "x" * 5000),
            a_home("worker-b", fallback="capacity endpoint returned HTTP 404"),
        )
        document = endpoint_report(tmap, NOW)
        assert document["issues"] == [
            {"group": "CapacityFallbackReasons", "code": "MalformedPayload", "count": 1}
        ]
        rows = endpoint_rows(document, wide=True)
        assert values(rows, "Issue") == ["CapacityFallbackReasons: MalformedPayload (1)"]
        assert values(rows, "Home cap fallback") == ["MalformedPayload", "HTTPError"]

    def test_a_report_without_malformed_reasons_has_no_issue(self) -> None:
        tmap = a_trafficmap(a_home("worker-a", fallback="capacity endpoint returned HTTP 404"))
        document = endpoint_report(tmap, NOW)
        assert document["issues"] == []
        assert values(endpoint_rows(document, wide=False), "Issue") == []

    def test_the_table_ends_with_omes_hints(self) -> None:
        rows = rows_of(a_trafficmap(a_home("worker-a", reports=2)))
        assert values(rows, "Hint") == [
            "Routing generation does not date placement",
            "Recorded probes only; no CLI network probe",
        ]

    def test_an_empty_map_shows_no_homes(self) -> None:
        tmap = a_trafficmap(placed=False)
        rows = rows_of(tmap)
        assert values(rows, "Route homes") == ["0"]
        assert values(rows, "Routable") == ["False: NotPlaced (Current)"]


class TestConditionFreshness:
    @pytest.mark.parametrize(
        ("observed", "generation", "freshness"),
        [
            (3, 3, "Current"),
            (2, 3, "Stale"),
            (4, 3, "Invalid"),
            (0, 3, "Invalid"),
            (None, 3, "Unverifiable"),
            (3, None, "Unverifiable"),
        ],
    )
    def test_freshness_compares_with_the_maps_generation(
        self, observed: int | None, generation: int | None, freshness: str
    ) -> None:
        condition = {} if observed is None else {"observedGeneration": observed}
        assert condition_freshness(condition, generation) == freshness


class TestEndpointOrigin:
    @pytest.mark.parametrize(
        ("url", "origin"),
        [
            (
                "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com/v1",
                "http://qwen3-0-6b.qwen3-0-6b.worker-a.example.com",
            ),
            (
                "https://llm.worker-a.example.com:8443/qwen3-0-6b/qwen3-0-6b",
                "https://llm.worker-a.example.com:8443",
            ),
            ("http://[::1]:8080/", "http://[::1]:8080"),
            (None, "NotRecorded"),
            ("", "NotRecorded"),
            ("ftp://worker-a.example.com", "InvalidEndpoint"),
            ("http://worker-a.example.com:99999", "InvalidEndpoint"),
            ("not a url", "InvalidEndpoint"),
        ],
    )
    def test_an_endpoint_shows_only_its_origin(self, url: str | None, origin: str) -> None:
        assert endpoint_origin(url) == origin


class TestTable:
    def test_a_long_value_is_cut_to_56_characters(self) -> None:
        message = actions.APPLIED_MESSAGE
        assert cut(message, 56) == "API accepted traffic annotation request; not TrafficM..."
        assert cut("short", 56) == "short"

    def test_a_long_field_is_cut_to_18_characters(self) -> None:
        """As OME's tables: `TrafficMap Returned` prints as `TrafficMap Retu...`."""
        table = render_fields([("TrafficMap Returned", "2"), ("Capacity fallback", "x")])
        assert [line.split("   ")[0] for line in table.splitlines()[1:]] == [
            "TrafficMap Retu...",
            "Capacity fallback",
        ]

    def test_wide_shows_the_capacity_provenance_row_cut_as_ome_does(self) -> None:
        tmap = a_trafficmap(a_home("worker-a", reports=1))
        table = format_endpoint_table(endpoint_report(tmap, NOW), wide=True)
        rows = [line.split() for line in table.splitlines() if line.startswith("Capacity prov")]
        assert rows == [["Capacity", "proven...", "Endpoint"]]

    def test_a_value_cannot_forge_a_row(self) -> None:
        table = render_fields([("Reason", "ok\nInjected   row")])
        assert table.count("\n") == 2
        assert "ok\\nInjected" in table

    def test_full_keeps_long_values(self) -> None:
        value = "v" * 80
        assert value in render_fields([("Follow-up", value)], full=True)
        assert value not in render_fields([("Follow-up", value)])


# --- traffic drain and undrain ----------------------------------------------------------


class TestRequestChecks:
    @pytest.mark.parametrize(
        ("action", "overrides", "message"),
        [
            (actions.DRAIN, {"names": ()}, actions.ONE_SERVICE),
            (actions.DRAIN, {"names": ("a", "b")}, actions.ONE_SERVICE),
            (actions.DRAIN, {"output": "xml"}, actions.BAD_OUTPUT),
            (actions.DRAIN, {"dry_run": "maybe"}, actions.BAD_DRY_RUN),
            (actions.DRAIN, {"names": ("Chat_1",)}, actions.BAD_NAME),
            (actions.DRAIN, {"cluster": None}, actions.NEEDS_WORKLOAD_CLUSTER),
            (actions.DRAIN, {"drain_id": None}, actions.BAD_ID),
            (actions.DRAIN, {"drain_id": "Maintenance_A"}, actions.BAD_ID),
            (actions.DRAIN, {"cluster": "Worker_A"}, actions.BAD_CLUSTER),
            (actions.DRAIN, {"reason": None}, actions.BAD_REASON),
            (actions.DRAIN, {"reason": " padded"}, actions.BAD_REASON),
            (actions.DRAIN, {"reason": "two\nlines"}, actions.BAD_REASON),
            (actions.DRAIN, {"reason": "x" * 257}, actions.BAD_REASON),
            (actions.DRAIN, {"reason": "key sk-abcdefghijklmnopqrstuvwx"}, actions.BAD_REASON),
            (
                actions.DRAIN,
                {"reason": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig"},
                actions.BAD_REASON,
            ),
            (actions.DRAIN, {"namespace": None}, actions.NO_NAMESPACE),
            (actions.DRAIN, {"namespace": "Prod"}, actions.BAD_NAMESPACE),
            (actions.DRAIN, {"context": None}, actions.BAD_CONTEXT),
            (actions.DRAIN, {"context": "hub\x1b[2J"}, actions.BAD_CONTEXT),
            (actions.UNDRAIN, {"names": ()}, actions.ONE_SERVICE),
            (actions.UNDRAIN, {"drain_id": "-bad"}, actions.BAD_ID),
        ],
    )
    def test_bad_flags_are_refused_with_a_fixed_message(
        self, action: str, overrides: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(actions.Refused) as refused:
            a_request(action, **overrides)
        assert refused.value.message == message
        assert refused.value.exit_code == 1

    def test_the_first_failing_check_wins(self) -> None:
        """Missing --workload-cluster is reported before a bad --id."""
        with pytest.raises(actions.Refused) as refused:
            a_request(cluster=None, drain_id="BAD")
        assert refused.value.message == actions.NEEDS_WORKLOAD_CLUSTER

    def test_undrain_ignores_drain_only_flags(self) -> None:
        request = a_request(actions.UNDRAIN, cluster=None, reason=None)
        assert request.cluster is None and request.reason is None


class TestPlan:
    def test_drain_adds_one_entry_and_keeps_the_others(self) -> None:
        existing = '{"rack-b":{"cluster":"worker-b","reason":"rack swap"}}'
        plan = actions.plan_action(a_request(), an_isvc(drains=existing))
        assert (plan.before, plan.after) == (1, 2)
        assert set(parse_drains(plan.value)) == {"rack-b", "maintenance-a"}

    def test_drain_of_a_service_without_drains_writes_the_documented_value(self) -> None:
        plan = actions.plan_action(a_request(), an_isvc())
        assert plan.value == MAINTENANCE_A
        assert (plan.before, plan.after) == (0, 1)

    def test_undrain_of_the_last_drain_removes_the_annotation(self) -> None:
        plan = actions.plan_action(a_request(actions.UNDRAIN), an_isvc(drains=MAINTENANCE_A))
        assert plan.value is None
        assert (plan.cluster, plan.before, plan.after) == ("worker-a", 1, 0)
        patch = actions.guarded_patch(plan)
        assert patch["metadata"]["annotations"] == {ANNOTATION: None}

    def test_the_patch_is_guarded_by_uid_and_resource_version(self) -> None:
        plan = actions.plan_action(a_request(), an_isvc())
        patch = actions.guarded_patch(plan)
        assert patch == {
            "metadata": {
                "uid": "2f6c1d9e-4b7a-4c1e-9f3d-8a5b6c7d0e12",
                "resourceVersion": "1284711",
                "annotations": {ANNOTATION: MAINTENANCE_A},
            }
        }

    @pytest.mark.parametrize(
        ("action", "isvc", "message"),
        [
            (actions.DRAIN, an_isvc(drains=MAINTENANCE_A), ALREADY_EXISTS),
            (actions.UNDRAIN, an_isvc(), DOES_NOT_EXIST),
            (
                actions.UNDRAIN,
                an_isvc(drains='{"other":{"cluster":"worker-b","reason":"x"}}'),
                DOES_NOT_EXIST,
            ),
            (actions.DRAIN, an_isvc(drains="{not json"), actions.MALFORMED),
            (
                actions.UNDRAIN,
                an_isvc(drains='{"a":{"cluster":"worker-a","reason":"x","extra":1}}'),
                actions.MALFORMED,
            ),
            (
                actions.DRAIN,
                an_isvc(
                    drains='{"a":{"cluster":"worker-a","reason":"x"},"a":{"cluster":"worker-b","reason":"y"}}'
                ),
                actions.MALFORMED,
            ),
            (actions.DRAIN, an_isvc(drains="x" * (32 * 1024 + 1)), actions.OVER_BOUNDS),
            (
                actions.DRAIN,
                an_isvc(
                    drains=json.dumps(
                        {f"d{i}": {"cluster": "worker-b", "reason": "r"} for i in range(65)}
                    )
                ),
                actions.OVER_BOUNDS,
            ),
            (
                actions.DRAIN,
                an_isvc(
                    drains=json.dumps(
                        {f"d{i}": {"cluster": "worker-b", "reason": "r"} for i in range(64)}
                    )
                ),
                actions.OVER_BOUNDS,
            ),
            (
                actions.DRAIN,
                an_isvc(labels={"ome.io/placement-origin": "hub"}),
                actions.PLACEMENT_COPY,
            ),
            (actions.DRAIN, an_isvc(placement=False), actions.NOT_ELIGIBLE),
            (actions.DRAIN, an_isvc(uid=None), actions.BAD_IDENTITY),
            (actions.DRAIN, an_isvc(version=None), actions.BAD_IDENTITY),
            (actions.DRAIN, an_isvc(deleting=True), actions.BEING_DELETED),
        ],
    )
    def test_unsafe_changes_are_refused(
        self, action: str, isvc: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(actions.Refused) as refused:
            actions.plan_action(a_request(action), isvc)
        assert refused.value.message == message

    def test_a_response_for_another_object_is_refused(self) -> None:
        isvc = an_isvc()
        isvc["metadata"]["name"] = "other"
        with pytest.raises(actions.Refused, match="does not match exact request"):
            actions.plan_action(a_request(), isvc)


class TestPreviewAndResult:
    def test_the_preview_shows_every_value_of_the_change_in_full(self) -> None:
        plan = actions.plan_action(a_request(), an_isvc())
        preview = actions.format_preview(plan)
        rows = dict(actions.preview_rows(plan))
        assert preview.splitlines()[0] == actions.PREVIEW_TITLE
        assert rows["UID"] == "2f6c1d9e-4b7a-4c1e-9f3d-8a5b6c7d0e12"
        assert rows["ResourceVersion"] == "1284711"
        assert rows["Reason"] == '"planned maintenance"'
        assert rows["Override count"] == "0 -> 1"
        assert rows["Annotation"] == ANNOTATION
        assert "kubectl ome placement endpoint chat -n prod --context=hub" in preview

    @pytest.mark.parametrize(
        ("dry_run", "accepted", "applied", "message"),
        [
            (
                "none",
                True,
                True,
                "API accepted traffic annotation request; not TrafficMap convergence.",
            ),
            ("server", True, False, "API dry-run accepted; no changes persisted."),
            (
                "client",
                False,
                False,
                "Validated locally; no patch sent. TrafficMap convergence was not observed.",
            ),
        ],
    )
    def test_the_result_says_what_the_api_server_did(
        self, dry_run: str, accepted: bool, applied: bool, message: str
    ) -> None:
        plan = actions.plan_action(a_request(dry_run=dry_run), an_isvc())
        result = actions.action_result(plan, NOW)
        assert (result["accepted"], result["applied"], result["message"]) == (
            accepted,
            applied,
            message,
        )
        assert result["dryRun"] == dry_run
        assert result["traffic"] == {
            "overrideID": "maintenance-a",
            "cluster": "worker-a",
            "overridesBefore": 0,
            "overridesAfter": 1,
        }

    def test_the_result_table_cuts_long_values_and_wide_adds_identity(self) -> None:
        plan = actions.plan_action(a_request(), an_isvc())
        result = actions.action_result(plan, NOW)
        table = dict(actions.result_rows(result, wide=False))
        assert table["target"] == "InferenceService/prod/chat"
        assert table["accepted"] == "Yes"
        assert table["overrides"] == "0 -> 1"
        assert "uid" not in table
        text = actions.format_result_table(result)
        assert "API accepted traffic annotation request; not TrafficM...\n" in text
        wide = dict(actions.result_rows(result, wide=True))
        assert wide["resource-version"] == "1284711"

    @pytest.mark.parametrize(
        ("answer", "ok"),
        [
            ("y\n", True),
            ("YES\n", True),
            (" Yes \n", True),
            ("n\n", False),
            ("\n", False),
            ("", False),
            ("yes" + " " * 20 + "\n", False),
            ("sure\n", False),
        ],
    )
    def test_only_y_or_yes_confirms(self, answer: str, ok: bool) -> None:
        assert actions.confirmed(answer) is ok
