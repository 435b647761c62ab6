"""`kubectl ome traffic drain|undrain`: OME's checks, guarded JSON Patch, preview and result."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubectl_builders import NOW, UID, an_isvc

from ome_routing.core.drains import ANNOTATION
from ome_routing.kubectl import actions, drain_checks
from ome_routing.kubectl.drain_checks import DRAIN, UNDRAIN, ActionRequest, Refused

MAINTENANCE_A = '{"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'


def a_request(action: str = DRAIN, **overrides: Any) -> ActionRequest:
    fields: dict[str, Any] = {
        "action": action,
        "name": "chat",
        "namespace": "prod",
        "context": "hub",
        "drain_id": "maintenance-a",
        "cluster": "worker-a" if action == DRAIN else "",
        "reason": "planned maintenance" if action == DRAIN else "",
    }
    fields.update(overrides)
    return ActionRequest(**fields)


def a_target(drains: str | None = None, **meta: Any) -> dict[str, Any]:
    isvc = an_isvc(
        annotations={"team": "serving"}
        if drains is None
        else {ANNOTATION: drains, "team": "serving"}
    )
    isvc["metadata"].update(meta)
    return isvc


def check(action: str = DRAIN, names: tuple[str, ...] = ("chat",), **flags: Any) -> None:
    values: dict[str, Any] = {
        "drain_id": "maintenance-a",
        "cluster": "worker-a" if action == DRAIN else "",
        "reason": "planned maintenance" if action == DRAIN else "",
        "dry_run": "none",
        "output": "table",
    }
    values.update(flags)
    drain_checks.check_flags(action, names, **values)


class TestFlags:
    @pytest.mark.parametrize(
        ("names", "flags", "message"),
        [
            ((), {}, drain_checks.ONE_SERVICE),
            (("a", "b"), {}, drain_checks.ONE_SERVICE),
            (("chat",), {"output": "xml"}, drain_checks.BAD_OUTPUT),
            (("chat",), {"dry_run": "maybe"}, drain_checks.BAD_DRY_RUN),
            (("Chat",), {}, drain_checks.BAD_NAME),
            (("chat",), {"cluster": ""}, drain_checks.NEEDS_WORKLOAD_CLUSTER),
            (("chat",), {"drain_id": "Bad_ID"}, drain_checks.BAD_ID),
            (("chat",), {"cluster": "Worker_A"}, drain_checks.BAD_CLUSTER),
            (("chat",), {"reason": " padded"}, drain_checks.BAD_REASON),
            (("chat",), {"reason": "line\nbreak"}, drain_checks.BAD_REASON),
            (("chat",), {"reason": "x" * 257}, drain_checks.BAD_REASON),
            (("chat",), {"reason": "key sk-" + "a" * 20}, drain_checks.BAD_REASON),
        ],
    )
    def test_each_bad_flag_is_refused_with_omes_message(
        self, names: tuple[str, ...], flags: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(Refused) as refused:
            check(DRAIN, names, **flags)
        assert refused.value.message == message

    def test_the_first_failing_check_wins(self) -> None:
        with pytest.raises(Refused) as refused:
            check(DRAIN, ("Chat",), output="xml", drain_id="Bad_ID")
        assert refused.value.message == drain_checks.BAD_OUTPUT

    def test_a_reason_with_non_ascii_text_is_accepted(self) -> None:
        check(DRAIN, reason="Wartung für Rack 4 — geplant")

    @pytest.mark.parametrize(
        ("namespace", "context", "message"),
        [
            (None, "hub", drain_checks.NO_NAMESPACE),
            ("Prod", "hub", drain_checks.BAD_NAMESPACE),
            ("prod", None, drain_checks.BAD_CONTEXT),
            ("prod", "hub context", drain_checks.BAD_CONTEXT),
        ],
    )
    def test_the_namespace_and_context_are_checked(
        self, namespace: str | None, context: str | None, message: str
    ) -> None:
        with pytest.raises(Refused) as refused:
            drain_checks.check_scope(namespace, context)
        assert refused.value.message == message


class TestPlan:
    def test_drain_adds_one_override_and_keeps_the_others(self) -> None:
        plan = actions.plan_action(
            a_request(drain_id="rack-b", cluster="worker-b", reason="rack swap"),
            a_target(MAINTENANCE_A),
        )
        value = json.loads(plan.patch)[-1]["value"]
        assert value == (
            '{"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"},'
            '"rack-b":{"cluster":"worker-b","reason":"rack swap"}}'
        )
        assert (plan.before, plan.after) == (1, 2)

    def test_the_patch_tests_uid_and_resource_version_first(self) -> None:
        plan = actions.plan_action(a_request(), a_target())
        assert json.loads(plan.patch) == [
            {"op": "test", "path": "/metadata/uid", "value": UID},
            {"op": "test", "path": "/metadata/resourceVersion", "value": "1284711"},
            {
                "op": "add",
                "path": "/metadata/annotations/ome.io~1traffic-drain",
                "value": MAINTENANCE_A,
            },
        ]

    def test_a_service_without_annotations_gets_the_map_first(self) -> None:
        isvc = an_isvc()
        plan = actions.plan_action(a_request(), isvc)
        ops = json.loads(plan.patch)
        assert ops[2] == {"op": "add", "path": "/metadata/annotations", "value": {}}
        assert ops[3]["op"] == "add"

    def test_an_existing_annotation_is_replaced(self) -> None:
        plan = actions.plan_action(a_request(drain_id="rack-b"), a_target(MAINTENANCE_A))
        assert json.loads(plan.patch)[-1]["op"] == "replace"

    def test_undrain_of_the_last_override_removes_the_annotation(self) -> None:
        plan = actions.plan_action(a_request(UNDRAIN), a_target(MAINTENANCE_A))
        assert json.loads(plan.patch)[-1] == {
            "op": "remove",
            "path": "/metadata/annotations/ome.io~1traffic-drain",
        }
        assert (plan.cluster, plan.reason, plan.before, plan.after) == (
            "worker-a",
            "planned maintenance",
            1,
            0,
        )

    def test_the_value_escapes_html_as_go_does(self) -> None:
        plan = actions.plan_action(a_request(reason="a <b> & c"), a_target())
        assert '"a \\u003cb\\u003e \\u0026 c"' in json.loads(plan.patch)[-1]["value"]

    @pytest.mark.parametrize(
        ("request_", "target", "message"),
        [
            (a_request(), a_target(MAINTENANCE_A), actions.ALREADY_EXISTS),
            (
                a_request(UNDRAIN, drain_id="rack-b"),
                a_target(MAINTENANCE_A),
                actions.DOES_NOT_EXIST,
            ),
            (a_request(), a_target("{oops"), drain_checks.MALFORMED),
            (a_request(), a_target(""), drain_checks.MALFORMED),
            (
                a_request(),
                a_target('{"Bad ID":{"cluster":"worker-a","reason":"r"}}'),
                drain_checks.MALFORMED,
            ),
            (a_request(), a_target("x" * (32 * 1024 + 1)), drain_checks.OVER_BOUNDS),
            (
                a_request(),
                a_target(deletionTimestamp="2026-09-15T11:00:00Z"),
                drain_checks.BEING_DELETED,
            ),
            (a_request(), a_target(uid=""), drain_checks.BAD_IDENTITY),
            (a_request(), a_target(generation=0), drain_checks.BAD_IDENTITY),
            (a_request(), a_target(name="other"), drain_checks.NOT_BOUND),
            (
                a_request(),
                a_target(labels={"ome.io/placement-origin": "hub"}),
                drain_checks.PLACEMENT_COPY,
            ),
            (a_request(), a_target(finalizers=["f"] * 65), drain_checks.OVER_BOUNDS),
        ],
    )
    def test_unsafe_changes_are_refused(
        self, request_: ActionRequest, target: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(Refused) as refused:
            actions.plan_action(request_, target)
        assert refused.value.message == message

    def test_a_service_that_is_not_placed_is_not_eligible(self) -> None:
        isvc = an_isvc()
        del isvc["spec"]["placement"]
        with pytest.raises(Refused) as refused:
            actions.plan_action(a_request(), isvc)
        assert refused.value.message == drain_checks.NOT_ELIGIBLE

    @pytest.mark.parametrize("count", [40_000, 33_000])
    def test_the_metadata_bound_counts_bytes_as_go_does(self, count: int) -> None:
        """OME's 65,536 metadata bound is Go's `len`: bytes, not characters. An annotation
        of `é` (2 bytes each) over the bound in bytes, under it in characters, is refused
        (issue 36: 40,000 `é` are 80,000 bytes)."""
        target = a_target()
        target["metadata"]["annotations"]["note"] = "é" * count
        with pytest.raises(Refused) as refused:
            actions.plan_action(a_request(), target)
        assert refused.value.message == drain_checks.OVER_BOUNDS

    def test_the_same_characters_in_ascii_fit_the_bound(self) -> None:
        target = a_target()
        target["metadata"]["annotations"]["note"] = "e" * 33_000
        assert actions.plan_action(a_request(), target).after == 1

    def test_a_new_annotation_on_a_full_map_is_refused(self) -> None:
        target = a_target()
        target["metadata"]["annotations"] = {f"k{i}": "v" for i in range(256)}
        with pytest.raises(Refused) as refused:
            actions.plan_action(a_request(), target)
        assert refused.value.message == drain_checks.OVER_BOUNDS


class TestResponse:
    def answer(self, **changes: Any) -> bytes:
        body: dict[str, Any] = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {
                "name": "chat",
                "namespace": "prod",
                "uid": UID,
                "resourceVersion": "1284712",
            },
        }
        body.update(changes)
        return json.dumps(body).encode()

    def test_the_same_service_is_accepted(self) -> None:
        actions.check_response(self.answer(), actions.plan_action(a_request(), a_target()))

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            (b"", actions.RESPONSE_BOUNDS),
            (b"x" * (1024 * 1024 + 1), actions.RESPONSE_BOUNDS),
            (b"not json", actions.NOT_BOUND_RESPONSE),
            (json.dumps({"kind": "Status"}).encode(), actions.NOT_BOUND_RESPONSE),
        ],
    )
    def test_an_answer_that_is_not_the_service_leaves_the_outcome_unknown(
        self, body: bytes, message: str
    ) -> None:
        with pytest.raises(Refused) as refused:
            actions.check_response(body, actions.plan_action(a_request(), a_target()))
        assert refused.value.message == message

    def test_another_uid_is_not_bound(self) -> None:
        body = self.answer(
            metadata={"name": "chat", "namespace": "prod", "uid": "x", "resourceVersion": "2"}
        )
        with pytest.raises(Refused, match="not bound"):
            actions.check_response(body, actions.plan_action(a_request(), a_target()))


class TestPreviewAndResult:
    def test_the_preview_is_omes_table_and_notes(self) -> None:
        plan = actions.plan_action(a_request(), a_target())
        assert actions.format_preview(plan) == (
            "ALPHA guarded traffic action (not TrafficMap convergence)\n"
            "FIELD             VALUE\n"
            "Action            traffic drain\n"
            "Context           hub\n"
            "Workload NS       prod\n"
            "Target            InferenceService/chat\n"
            f"UID               {UID}\n"
            "ResourceVersion   1284711\n"
            "Dry-run           none\n"
            "Override ID       maintenance-a\n"
            "Cluster           worker-a\n"
            'Reason            "planned maintenance"\n'
            "Override count    0 -> 1\n"
            "Annotation        ome.io/traffic-drain\n"
            "Follow-up         kubectl ome traffic status chat -n prod --context=hub\n"
            "API acceptance is not TrafficMap convergence or data-plane realization.\n"
            "The exact InferenceService UID/resourceVersion is tested atomically.\n"
            "Other annotations and traffic-drain override IDs are preserved.\n"
            "Run the previewed traffic status command to observe controller evidence.\n"
        )

    def test_a_long_value_continues_on_the_next_rows(self) -> None:
        plan = actions.plan_action(a_request(reason="r" * 150), a_target())
        rows = actions.preview_rows(plan)
        reason = [(field, value) for field, value in rows if field in ("Reason", "(continued)")]
        assert [field for field, _ in reason] == ["Reason", "(continued)", "(continued)"]
        assert "".join(value for _, value in reason) == '"' + "r" * 150 + '"'
        assert all(len(value) <= 60 for _, value in reason)

    @pytest.mark.parametrize(
        ("dry_run", "accepted", "applied", "message"),
        [
            ("none", True, True, actions.APPLIED_MESSAGE),
            ("server", True, False, actions.SERVER_DRY_RUN_MESSAGE),
            ("client", False, False, actions.CLIENT_DRY_RUN_MESSAGE),
        ],
    )
    def test_the_result_says_what_the_api_server_did(
        self, dry_run: str, accepted: bool, applied: bool, message: str
    ) -> None:
        plan = actions.plan_action(a_request(dry_run=dry_run), a_target())
        result = actions.action_result(plan, NOW, accepted=dry_run != "client")
        assert list(result) == [
            "apiVersion",
            "kind",
            "collectedAt",
            "action",
            "target",
            "dryRun",
            "accepted",
            "applied",
            "message",
            "followUp",
            "traffic",
        ]
        assert (result["accepted"], result["applied"], result["message"]) == (
            accepted,
            applied,
            message,
        )
        assert result["followUp"] == "kubectl ome traffic status chat -n prod --context=hub"
        assert result["traffic"] == {
            "overrideID": "maintenance-a",
            "cluster": "worker-a",
            "overridesBefore": 0,
            "overridesAfter": 1,
        }

    def test_the_result_table_cuts_values_and_wide_adds_identity(self) -> None:
        plan = actions.plan_action(a_request(), a_target())
        result = actions.action_result(plan, NOW, accepted=True)
        table = actions.format_result_table(result)
        assert table.splitlines()[:3] == [
            "FIELD         VALUE",
            "action        traffic drain",
            "target        InferenceService/prod/chat",
        ]
        assert "follow-up     kubectl ome traffic status chat -n prod --context=hub" in table
        assert "uid" not in table
        wide = actions.format_result_table(result, wide=True)
        assert f"uid                {UID}" in wide
        assert "resource-version   1284711" in wide
