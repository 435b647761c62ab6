"""The journal of weight changes: which homes changed and the words for each cause.

`core.journal.changes` compares a map's entries before and after a write; one test per
cause's text, then the Event's type and reason, the evidence read from a window, and
the switch `routing.journal.enabled`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ome_routing.core.capacity import WindowSettings, empty_window, record_failure, record_reading
from ome_routing.core.config import ConfigError, config_from_multicluster
from ome_routing.core.durations import parse_duration
from ome_routing.core.journal import (
    CAUSE_TEXTS,
    NORMAL,
    WARNING,
    Cause,
    Change,
    Evidence,
    changes,
    readings_text,
    window_evidence,
)
from ome_routing.core.report import Reading

NOW = datetime(2026, 12, 3, 3, 12, tzinfo=UTC)


def an_entry(cluster: str = "worker-b", weight: int = 2, **capacity: Any) -> dict[str, Any]:
    """An entry as OME stores it; `probe`, `drainRefs` and capacity fields as keywords."""
    probe = capacity.pop("probe", None)
    refs = capacity.pop("drainRefs", None)
    cap = {"allocated": 2, "ready": 2, "source": "ControlPlane"} | capacity
    entry: dict[str, Any] = {
        "cluster": cluster,
        "endpoint": f"http://{cluster}.example:8080",
        "weight": weight,
        "healthy": True,
        "capacity": {k: v for k, v in cap.items() if v is not None},
    }
    if probe is not None:
        entry["probe"] = probe
    if refs:
        entry["drainRefs"] = refs
    return entry


def one(previous: list[dict[str, Any]], current: list[dict[str, Any]], **evidence: Any) -> Change:
    found = changes(previous, current, {"worker-b": Evidence(**evidence)} if evidence else None)
    assert len(found) == 1, found
    return found[0]


# --- one text per cause ------------------------------------------------------------


def test_a_ceiling_that_falls_says_the_readings_that_set_it() -> None:
    """The issue's example, word for word."""
    change = one(
        [an_entry(weight=2, allocated=3, ready=3, reported=3)],
        [an_entry(weight=1, allocated=1, ready=3, reported=1, source="Endpoint")],
        readings=(1, 1, 1),
        quorum=3,
    )
    assert change.note.startswith(
        "worker-b weight 2 -> 1: ceiling 3 -> 1 after 3 readings of 1 (quorum 3)"
    )
    assert change.reason is Cause.CEILING_CHANGED
    assert change.type == NORMAL


def test_allocated_is_told_with_a_ceiling_only_when_the_ceiling_does_not_explain_it() -> None:
    """Admitted 4 -> 6 with a ceiling 8 -> 9 that caps neither side: both are told."""
    change = one(
        [an_entry(weight=2, allocated=4, ready=6, reported=8)],
        [an_entry(weight=3, allocated=6, ready=6, reported=9)],
    )
    assert [r.text for r in change.reasons] == ["ceiling 8 -> 9", "allocated 4 -> 6"]


def test_a_ceiling_that_rises_counts_the_readings_at_or_above_it() -> None:
    change = one(
        [an_entry(weight=1, allocated=1, ready=3, reported=1, source="Endpoint")],
        [an_entry(weight=3, allocated=3, ready=3, reported=3)],
        readings=(1, 3, 4, 3),
        quorum=2,
    )
    assert change.reasons[0].text == "ceiling 1 -> 3 after 3 readings of 3 or more (quorum 2)"


def test_readings_that_differ_are_counted_as_at_most_the_ceiling() -> None:
    assert readings_text((0, 1, 1, 5), 1, 3) == "3 readings of 1 or less"
    assert readings_text((1,), 1, 3) == "1 reading of 1"


def test_a_ceiling_that_appears_says_none_before_it() -> None:
    change = one(
        [
            an_entry(
                weight=2, fallbackReason="capacity report awaiting quorum (2/3 accepted samples)"
            )
        ],
        [an_entry(weight=1, allocated=1, reported=1, source="Endpoint")],
        readings=(1, 0, 1, 4),
        quorum=3,
    )
    assert change.reasons[0].text == "ceiling none -> 1 after 3 readings of 1 or less (quorum 3)"


def test_a_ceiling_without_known_readings_is_told_without_them() -> None:
    change = one(
        [an_entry(weight=2, allocated=3, ready=3, reported=3)],
        [an_entry(weight=1, allocated=1, ready=3, reported=1, source="Endpoint")],
    )
    assert change.reasons[0].text == "ceiling 3 -> 1"


def test_a_lost_ceiling_is_a_warning_with_the_fallback_reason_verbatim() -> None:
    reason = 'capacity endpoint unreachable: Get "http://worker-b.example:8080/capacity": EOF'
    change = one(
        [an_entry(weight=1, allocated=1, reported=1, source="Endpoint")],
        [an_entry(weight=2, fallbackReason=reason)],
    )
    assert change.note == f"worker-b weight 1 -> 2: ceiling 1 -> none: {reason}"
    assert change.reason is Cause.CAPACITY_FALLBACK
    assert change.type == WARNING


def test_a_closed_probe_gate_is_a_warning_with_its_failures() -> None:
    probe = {
        "policyDigest": "d",
        "result": "Failing",
        "gated": True,
        "consecutiveFailures": 3,
        "message": "HTTP 503",
    }
    change = one([an_entry(weight=2)], [an_entry(weight=0, probe=probe)])
    assert change.note == (
        "worker-b weight 2 -> 0: probe gate closed: 3 consecutive failures (HTTP 503)"
    )
    assert (change.reason, change.type) == (Cause.PROBE_GATED, WARNING)


def test_an_opened_probe_gate() -> None:
    gated = {"policyDigest": "d", "result": "Failing", "gated": True}
    change = one(
        [an_entry(weight=0, probe=gated)],
        [an_entry(weight=2, probe={"policyDigest": "d", "result": "Passing"})],
    )
    assert change.note == "worker-b weight 0 -> 2: probe gate opened"
    assert change.type == NORMAL


def test_a_traffic_drain_names_its_override() -> None:
    change = one([an_entry(weight=2)], [an_entry(weight=0, drainRefs=["maint-1"])])
    assert change.note == "worker-b weight 2 -> 0: drained by traffic-drain override maint-1"
    assert change.reason is Cause.DRAINED


def test_an_undrain_names_the_overrides_removed() -> None:
    change = one([an_entry(weight=0, drainRefs=["a", "b"])], [an_entry(weight=2)])
    assert (
        change.note == "worker-b weight 0 -> 2: no longer drained by traffic-drain overrides a, b"
    )
    assert change.reason is Cause.UNDRAINED


def test_a_plan_drain_is_told_from_the_evidence() -> None:
    change = one([an_entry(weight=2)], [an_entry(weight=0)], plan_drained=True)
    assert change.note == "worker-b weight 2 -> 0: drained by the placement plan (drainRequested)"


@pytest.mark.parametrize(
    ("field", "before", "after", "text"),
    [
        ("ready", 2, 1, "ready 2 -> 1"),
        ("allocated", 2, 4, "allocated 2 -> 4"),
        ("factor", None, "0.5", "factor 1 -> 0.5"),
    ],
)
def test_the_other_inputs_of_a_weight(field: str, before: Any, after: Any, text: str) -> None:
    change = one([an_entry(weight=2, **{field: before})], [an_entry(weight=1, **{field: after})])
    assert change.reasons[0].text == text


def test_a_source_change_with_the_same_ceiling() -> None:
    change = one(
        [an_entry(weight=2, allocated=2, reported=3)],
        [an_entry(weight=2, allocated=2, reported=3, source="Endpoint")],
    )
    assert change.note == "worker-b weight 2 (unchanged): capacity source ControlPlane -> Endpoint"


def test_a_weight_moved_only_by_the_other_homes_is_rebalanced() -> None:
    """1:1 becomes 3:1 when worker-b's ceiling falls: worker-a's own entry did not change."""
    before = [
        an_entry("worker-a", 1, allocated=3, ready=3),
        an_entry("worker-b", 1, allocated=3, ready=3),
    ]
    after = [
        an_entry("worker-a", 3, allocated=3, ready=3),
        an_entry("worker-b", 1, allocated=1, ready=3, reported=1, source="Endpoint"),
    ]
    found = {c.cluster: c for c in changes(before, after)}
    assert (
        found["worker-a"].note == "worker-a weight 1 -> 3: weights rebalanced with the other homes"
    )
    assert found["worker-a"].reason is Cause.REBALANCED


def test_a_ceiling_that_rises_under_a_ramp_says_the_ramp_holds_the_weight() -> None:
    """worker-b's ceiling is back at 2, but a ramp (ours) keeps its weight at 1 for now."""
    change = one(
        [an_entry(weight=1, allocated=1, ready=2, reported=1, source="Endpoint")],
        [an_entry(weight=1, allocated=2, ready=2, reported=2, source="Endpoint")],
        readings=(2, 2),
        quorum=2,
        ramp_target=2,
        ramp_periods_left=2,
    )
    assert change.note == (
        "worker-b weight 1 (unchanged): ceiling 1 -> 2 after 2 readings of 2 (quorum 2); "
        "ramping to its target weight 2 (2 period(s) left)"
    )
    assert change.reason is Cause.CEILING_CHANGED


def test_a_ramp_step_alone_and_the_last_one() -> None:
    """A weight moved by the ramp only says so, and the step that reaches the target says
    the ramp is done (not that the weights were rebalanced)."""
    entry = {"allocated": 2, "ready": 2, "reported": 2, "source": "Endpoint"}
    step = one(
        [an_entry(weight=1, **entry)],
        [an_entry(weight=2, **entry)],
        ramp_target=3,
        ramp_periods_left=1,
        ramp_was_running=True,
    )
    assert step.note == "worker-b weight 1 -> 2: ramping to its target weight 3 (1 period(s) left)"
    assert step.reason is Cause.RAMP_STEP
    done = one(
        [an_entry(weight=2, **entry)],
        [an_entry(weight=3, **entry)],
        ramp_target=3,
        ramp_periods_left=0,
        ramp_was_running=True,
    )
    assert done.note == "worker-b weight 2 -> 3: ramp done: at its target weight 3"
    assert done.reason is Cause.RAMP_DONE
    # the annotation of a finished ramp explains no later change: rebalanced, as without it
    later = one(
        [an_entry(weight=3, **entry)],
        [an_entry(weight=1, **entry)],
        ramp_target=1,
        ramp_periods_left=0,
        ramp_was_running=False,
    )
    assert later.reason is Cause.REBALANCED


def test_homes_added_and_removed() -> None:
    found = changes([an_entry("worker-a", 2)], [an_entry("worker-b", 3)])
    assert [c.note for c in found] == [
        "worker-a weight 2 -> none: home removed",
        "worker-b weight none -> 3: home added",
    ]


def test_nothing_changed_is_no_change() -> None:
    """A fallback reason that moves on (1/3 -> 2/3) with nothing else is not journalled."""
    old = an_entry(fallbackReason="capacity report awaiting quorum (1/3 accepted samples)")
    new = an_entry(fallbackReason="capacity report awaiting quorum (2/3 accepted samples)")
    assert changes([old], [new]) == []
    assert changes([an_entry()], [an_entry()]) == []


def test_the_gate_comes_before_the_ceiling_in_the_words() -> None:
    probe = {"policyDigest": "d", "result": "Failing", "gated": True, "consecutiveFailures": 1}
    change = one(
        [an_entry(weight=2, allocated=3, ready=3, reported=3)],
        [an_entry(weight=0, allocated=1, ready=3, reported=1, source="Endpoint", probe=probe)],
    )
    assert [r.cause for r in change.reasons][:2] == [Cause.PROBE_GATED, Cause.CEILING_CHANGED]
    assert change.type == WARNING


def test_every_cause_has_one_text() -> None:
    assert set(CAUSE_TEXTS) == set(Cause)


# --- evidence from the window -------------------------------------------------------


def test_the_evidence_holds_the_fresh_readings_and_the_quorum() -> None:
    settings = WindowSettings(samples=5, quorum=3, max_age=parse_duration("30s"))
    window = empty_window(settings)
    for age, count in ((40, 9), (20, 1), (10, 1), (0, 2)):
        window = record_reading(
            window, Reading(count, NOW - timedelta(seconds=age)), NOW - timedelta(seconds=age)
        )
    assert window_evidence(window, NOW) == Evidence((1, 1, 2), 3, False)
    assert window_evidence(record_failure(window, "boom"), NOW).readings == ()
    assert window_evidence(None, NOW, plan_drained=True) == Evidence(None, None, True)


# --- the switch ---------------------------------------------------------------------


def _block(journal: object) -> dict[str, Any]:
    return {
        "enabled": True,
        "role": "control-plane",
        "config": {"routing": {"enabled": True, "journal": journal}},
    }


def test_the_journal_is_off_unless_enabled() -> None:
    assert config_from_multicluster(_block(None)).journal is False
    assert config_from_multicluster(_block({})).journal is False
    config = config_from_multicluster(_block({"enabled": True}))
    assert config.journal is True
    assert config.warnings == ()


def test_a_journal_switch_of_the_wrong_type_names_the_field_and_value() -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_multicluster(_block({"enabled": "yes"}))
    assert str(caught.value) == (
        'invalid multi-cluster configuration: routing.journal.enabled must be true or false, got "yes"'
    )


def test_an_unknown_journal_key_is_a_warning() -> None:
    config = config_from_multicluster(_block({"enabeld": True}))
    assert config.journal is False
    assert any("routing.journal.enabeld" in line for line in config.warnings)
