"""A home's probe state: verdicts, OME's hysteresis, the entry's `probe` block, restoring it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from builders import T0, at

from ome_routing.core.durations import parse_duration
from ome_routing.core.proberules import ProbePolicy
from ome_routing.core.probes import (
    MAX_COUNT,
    NOT_PROBED,
    Attempt,
    ProbeResult,
    ProbeState,
    body_error,
    classify,
    not_run,
    probe_to_json,
    reachable,
    record_attempt,
    restore,
    transport_error,
)

POLICY = ProbePolicy(
    path="/v1/models",
    method="GET",
    accept_statuses=(200,),
    gate_statuses=(404, 500, 502, 503, 504),
    period=parse_duration("10s"),
    timeout=parse_duration("3s"),
    failure_threshold=3,
    success_threshold=2,
    all_failed_policy="PreserveTraffic",
)
DIGEST = "sha256:" + "0" * 64
PASS = classify(200, POLICY)
FAIL = classify(503, POLICY)
UNKNOWN = classify(302, POLICY)


def run(*attempts: Attempt, state: ProbeState = NOT_PROBED) -> ProbeState:
    for number, attempt in enumerate(attempts):
        state = record_attempt(state, attempt, at(10 * number), POLICY)
    return state


class TestClassification:
    def test_accept_list_is_checked_first(self) -> None:
        both = replace(POLICY, accept_statuses=(503,))
        assert classify(503, both) == Attempt(ProbeResult.PASSING, "HTTP 503")

    def test_a_gate_status_fails(self) -> None:
        assert Attempt(ProbeResult.FAILING, "HTTP 503") == FAIL

    @pytest.mark.parametrize("status", [204, 302, 401, 403, 429])
    def test_any_other_status_is_inconclusive(self, status: int) -> None:
        assert classify(status, POLICY) == Attempt(
            ProbeResult.UNKNOWN, f"HTTP {status} (not in accept or gate list)"
        )

    def test_transport_and_body_errors_fail_and_an_unbuilt_request_is_inconclusive(self) -> None:
        assert transport_error("connection refused") == Attempt(
            ProbeResult.FAILING, "transport error: connection refused"
        )
        assert body_error("cut short") == Attempt(
            ProbeResult.FAILING, "response body error: cut short"
        )
        assert not_run("bad URL") == Attempt(ProbeResult.UNKNOWN, "probe could not run: bad URL")


class TestHysteresis:
    def test_failure_threshold_failures_in_a_row_gate(self) -> None:
        assert not run(FAIL, FAIL).gated
        state = run(FAIL, FAIL, FAIL)
        assert state.gated and state.failures == 3 and reachable(state) is False

    def test_a_pass_resets_the_failures(self) -> None:
        state = run(FAIL, FAIL, PASS, FAIL, FAIL)
        assert not state.gated and state.failures == 2

    def test_unknown_changes_neither_counter_nor_the_gate(self) -> None:
        state = run(FAIL, FAIL, UNKNOWN, FAIL)
        assert state.gated and state.failures == 3
        assert run(FAIL, FAIL, FAIL, UNKNOWN).gated

    def test_success_threshold_passes_in_a_row_reopen(self) -> None:
        state = run(FAIL, FAIL, FAIL, PASS)
        assert state.gated and state.passes == 1
        state = run(FAIL, FAIL, FAIL, PASS, PASS)
        assert not state.gated and state.passes == 0 and reachable(state) is True

    def test_a_failure_while_gated_resets_the_passes(self) -> None:
        state = run(FAIL, FAIL, FAIL, PASS, FAIL, PASS)
        assert state.gated and state.passes == 1

    def test_passes_count_only_while_gated(self) -> None:
        assert run(PASS, PASS, PASS).passes == 0

    def test_a_home_whose_every_result_is_unknown_is_never_gated(self) -> None:
        state = run(UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN)
        assert not state.gated and reachable(state) is None
        assert state.result is ProbeResult.UNKNOWN and state.observed

    def test_not_probed_is_neither_reachable_nor_unreachable(self) -> None:
        assert reachable(None) is None and reachable(NOT_PROBED) is None

    def test_the_last_attempt_sets_result_message_and_time(self) -> None:
        state = run(FAIL, UNKNOWN)
        assert state.result is ProbeResult.UNKNOWN
        assert state.message == "HTTP 302 (not in accept or gate list)"
        assert state.last_probe_time == at(10)

    def test_counters_stop_at_int32_max(self) -> None:
        full = ProbeState(failures=MAX_COUNT, gated=True, conclusive=True, observed=True)
        assert run(FAIL, state=full).failures == MAX_COUNT


class TestEntryBlock:
    def test_a_gated_home_as_ome_writes_it(self) -> None:
        state = run(FAIL, FAIL, FAIL)
        assert probe_to_json(replace(state, last_probe_time=T0.replace(microsecond=5)), DIGEST) == {
            "policyDigest": DIGEST,
            "result": "Failing",
            "gated": True,
            "lastProbeTime": "2026-09-28T10:00:00Z",
            "consecutiveFailures": 3,
            "message": "HTTP 503",
        }

    def test_gated_and_failures_are_left_out_while_zero(self) -> None:
        assert probe_to_json(run(PASS), DIGEST) == {
            "policyDigest": DIGEST,
            "result": "Passing",
            "lastProbeTime": "2026-09-28T10:00:00Z",
            "message": "HTTP 200",
        }


class TestRestore:
    def test_a_gate_comes_back_with_its_failures_and_the_next_probe_a_period_later(self) -> None:
        block = probe_to_json(run(FAIL, FAIL, FAIL), DIGEST)
        restored = restore(block, at(25), POLICY)
        assert restored.state.gated and restored.state.failures == 3
        assert restored.state.conclusive and restored.state.passes == 0
        assert restored.state.result is ProbeResult.FAILING
        assert restored.state.message == "HTTP 503"
        assert restored.next_probe == at(20) + timedelta(seconds=10)

    def test_a_missing_or_future_time_probes_at_once(self) -> None:
        assert restore({"result": "Passing"}, T0, POLICY).next_probe is None
        future = {"lastProbeTime": "2026-09-28T11:00:00Z"}
        assert restore(future, T0, POLICY).next_probe is None

    def test_odd_values_read_as_omes_defaults(self) -> None:
        restored = restore({"consecutiveFailures": -4, "result": ""}, T0, POLICY).state
        assert restored.failures == 0 and restored.result is ProbeResult.UNKNOWN
        assert not restored.conclusive and reachable(restored) is None
