"""`kubectl ome traffic drain|undrain` write the drain annotation with the controller's
codec (`core.drains`): the bytes Go's `json.Marshal` writes, and every request that OME's
rules accept is one the codec accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubectl_builders import an_isvc

from ome_routing.core.drains import ANNOTATION, Drain, add_drain, parse_drains, remove_drain
from ome_routing.kubectl import actions
from ome_routing.kubectl.drain_checks import DRAIN, UNDRAIN, ActionRequest, check_flags

MAINTENANCE_A = '{"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'


def a_request(action: str, drain_id: str, cluster: str = "", reason: str = "") -> ActionRequest:
    return ActionRequest(
        action=action,
        name="chat",
        namespace="prod",
        context="hub",
        drain_id=drain_id,
        cluster=cluster,
        reason=reason,
    )


def written(request: ActionRequest, drains: str) -> Any:
    """The annotation's value in the plan's patch (None: the patch removes it)."""
    isvc = an_isvc(annotations={ANNOTATION: drains, "team": "serving"})
    operation = json.loads(actions.plan_action(request, isvc).patch)[-1]
    return operation.get("value")


def test_a_drain_is_written_as_gos_json_marshal_writes_it() -> None:
    """`<`, `>` and `&` as \\u003c, \\u003e and \\u0026; other non-ASCII text as UTF-8."""
    reason = "disk <swap> & f\u00fcr Knoten"
    value = written(a_request(DRAIN, "kernel-b", "worker-b", reason), MAINTENANCE_A)
    assert value == (
        '{"kernel-b":{"cluster":"worker-b","reason":"disk \\u003cswap\\u003e \\u0026 f\u00fcr '
        'Knoten"},"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'
    )
    assert value == add_drain(MAINTENANCE_A, "kernel-b", "worker-b", reason)
    assert parse_drains(value)["kernel-b"] == Drain("worker-b", reason)


def test_an_undrain_keeps_the_other_drains_as_the_codec_writes_them() -> None:
    both = add_drain(MAINTENANCE_A, "kernel-b", "worker-b", "a <b>")
    value = written(a_request(UNDRAIN, "maintenance-a"), both)
    assert value == '{"kernel-b":{"cluster":"worker-b","reason":"a \\u003cb\\u003e"}}'
    assert value == remove_drain(both, "maintenance-a")[0]


@pytest.mark.parametrize(
    ("cluster", "reason"),
    [
        ("worker-a", "private use \ue000 in a reason"),
        ("worker-a", "unassigned \u0378 in a reason"),
        ("a" * 64 + ".example", "a subdomain's part may pass 63 characters"),
        ("worker-a", "x" * 256),
    ],
    ids=["private-use", "unassigned", "long-subdomain-part", "longest-reason"],
)
def test_what_omes_rules_accept_the_codec_accepts(cluster: str, reason: str) -> None:
    check_flags(
        DRAIN,
        ("chat",),
        drain_id="maintenance-b",
        cluster=cluster,
        reason=reason,
        dry_run="none",
        output="table",
    )
    value = written(a_request(DRAIN, "maintenance-b", cluster, reason), MAINTENANCE_A)
    assert parse_drains(value)["maintenance-b"] == Drain(cluster, reason)
