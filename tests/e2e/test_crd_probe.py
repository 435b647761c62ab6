"""The InferenceService CRD's `spec.routing.probe` rules, as the real API server applies them.

OME's markers and its six CEL rules, word for word; and the mistake OME's admission
lets through (a status in both lists), which the controller refuses later.
"""

from __future__ import annotations

from typing import Any

import pytest
from crd_helpers import apply, assert_applied, get
from tests.probe_spec import guide_probe

from ome_routing_dev.devcluster import LocalControlPlane

PROBE: dict[str, Any] = guide_probe()
ENABLED = (
    "an enabled probe must specify path, method, acceptStatuses, gateStatuses, period, "
    "timeout, failureThreshold, successThreshold, and allFailedPolicy"
)
DISABLED = "disabled must not be combined with probe configuration fields"


def apply_probe(plane: LocalControlPlane, namespace: str, probe: dict[str, Any]) -> tuple[int, str]:
    return apply(
        plane,
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "svc", "namespace": namespace},
            "spec": {
                "placement": {"policy": "ClusterAffinity", "mode": "All"},
                "routing": {"probe": probe},
            },
        },
    )


def without(key: str) -> dict[str, Any]:
    return {k: v for k, v in PROBE.items() if k != key}


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        pytest.param({"path": "/v1/models"}, ENABLED, id="incomplete"),
        pytest.param({"disabled": False}, ENABLED, id="disabled-false-counts-as-enabled"),
        pytest.param(without("allFailedPolicy"), ENABLED, id="no-policy"),
        pytest.param({"disabled": True, "path": "/v1/models"}, DISABLED, id="disabled-and-path"),
        pytest.param(
            {"disabled": True, "gateStatuses": [503]}, DISABLED, id="disabled-and-statuses"
        ),
        pytest.param({**PROBE, "period": "0s"}, "period must be positive", id="period-zero"),
        pytest.param({**PROBE, "timeout": "-1s"}, "timeout must be positive", id="timeout-neg"),
        pytest.param(
            {**PROBE, "timeout": "10s"}, "timeout must be shorter than period", id="timeout-eq"
        ),
        pytest.param(
            {**PROBE, "gateStatuses": [503, 429]},
            "gateStatuses must not contain 401, 403, or 429",
            id="gate-429",
        ),
        pytest.param(
            {**PROBE, "path": "v1/models"},
            "spec.routing.probe.path in body should match '^/'",
            id="path-pattern",
        ),
        pytest.param(
            {**PROBE, "method": "PUT"},
            'spec.routing.probe.method: Unsupported value: "PUT"',
            id="method",
        ),
        pytest.param(
            {**PROBE, "acceptStatuses": [600]},
            "spec.routing.probe.acceptStatuses[0] in body should be less than or equal to 599",
            id="accept-600",
        ),
        pytest.param(
            {**PROBE, "gateStatuses": [99]},
            "spec.routing.probe.gateStatuses[0] in body should be greater than or equal to 100",
            id="gate-99",
        ),
        pytest.param(
            {**PROBE, "acceptStatuses": []},
            "spec.routing.probe.acceptStatuses in body should have at least 1 items",
            id="accept-empty",
        ),
        pytest.param(
            {**PROBE, "failureThreshold": 0},
            "spec.routing.probe.failureThreshold in body should be greater than or equal to 1",
            id="failure-0",
        ),
        pytest.param(
            {**PROBE, "allFailedPolicy": "Ignore"},
            'spec.routing.probe.allFailedPolicy: Unsupported value: "Ignore"',
            id="policy",
        ),
        pytest.param(
            {**PROBE, "gateStatuses": [503, 503]},
            "Duplicate value: 503",
            id="gate-set",
        ),
    ],
)
def test_the_api_server_refuses_a_broken_probe(
    control_plane: LocalControlPlane, namespace: str, probe: dict[str, Any], message: str
) -> None:
    code, output = apply_probe(control_plane, namespace, probe)
    assert code != 0
    assert message in output


@pytest.mark.parametrize(
    "probe",
    [
        pytest.param(PROBE, id="chart-example"),
        pytest.param({"disabled": True}, id="disabled"),
        pytest.param({**PROBE, "method": "HEAD"}, id="head"),
        # OME's admission lets a status in both lists through; the controller refuses it.
        pytest.param({**PROBE, "acceptStatuses": [200, 503]}, id="overlap"),
    ],
)
def test_the_api_server_accepts_what_ome_accepts(
    control_plane: LocalControlPlane, namespace: str, probe: dict[str, Any]
) -> None:
    assert_applied(*apply_probe(control_plane, namespace, probe))


def test_a_probe_is_stored_as_written(control_plane: LocalControlPlane, namespace: str) -> None:
    assert_applied(*apply_probe(control_plane, namespace, PROBE))
    stored = get(control_plane, "inferenceservice", namespace)
    assert stored["spec"]["routing"]["probe"] == PROBE
