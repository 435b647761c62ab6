"""The CRDs' own rules, as the API server applies them to `kubectl apply`."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ome_routing.devcluster import LocalControlPlane

POLL = {
    "path": "/capacity",
    "method": "GET",
    "format": "Report",
    "samples": 4,
    "quorum": 3,
    "period": "10s",
    "timeout": "3s",
    "maxAge": "40s",
}


def apply(plane: LocalControlPlane, namespace: str, capacity: dict[str, Any]) -> tuple[int, str]:
    manifest = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"placement": {"mode": "All"}, "routing": {"capacity": capacity}},
    }
    result = plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        (
            {"path": "/capacity", "method": "GET"},
            "an enabled capacity poll must specify path, method, format, period, timeout, samples, quorum, and maxAge",
        ),
        (
            {},
            "an enabled capacity poll must specify path, method, format, period, timeout, samples, quorum, and maxAge",
        ),
        ({**POLL, "samples": 2}, "quorum must not exceed samples"),
        ({**POLL, "maxAge": "5s"}, "maxAge must be at least period"),
        ({**POLL, "period": "10"}, "spec.routing.capacity.period: Invalid value"),
        ({**POLL, "timeout": "0s"}, "must be a positive duration such as 10s or 1m30s"),
        ({**POLL, "maxAge": "-40s"}, "must be a positive duration such as 10s or 1m30s"),
        (
            {"disabled": True, "path": "/capacity"},
            "disabled cannot be combined with other capacity poll fields",
        ),
        ({**POLL, "method": "HEAD"}, 'Unsupported value: "HEAD"'),
        ({**POLL, "samples": 0}, "spec.routing.capacity.samples"),
    ],
    ids=[
        "incomplete",
        "empty",
        "quorum",
        "maxAge",
        "unitless",
        "zero",
        "negative",
        "disabled-and-fields",
        "method",
        "samples-0",
    ],
)
def test_the_api_server_refuses_a_broken_poll(
    control_plane: LocalControlPlane, namespace: str, capacity: dict[str, Any], message: str
) -> None:
    code, output = apply(control_plane, namespace, capacity)
    assert code != 0
    assert message in output


@pytest.mark.parametrize(
    "capacity",
    [
        POLL,
        {"disabled": True},
        {**POLL, "period": "1m30s", "timeout": "1.5s", "maxAge": "1m30s"},
        # Mistakes the controller refuses later, as the specification says the API server accepts them:
        {**POLL, "maxAge": "20s"},
        {**POLL, "format": "report"},
        {**POLL, "period": "500ms", "timeout": "100ms", "maxAge": "2s"},
        {**POLL, "samples": 200},
    ],
    ids=[
        "spec-poll",
        "disabled",
        "go-durations",
        "maxAge-short",
        "format-case",
        "period-short",
        "samples-many",
    ],
)
def test_the_api_server_accepts_what_the_specification_says_it_does(
    control_plane: LocalControlPlane, namespace: str, capacity: dict[str, Any]
) -> None:
    code, output = apply(control_plane, namespace, capacity)
    assert code == 0, output
    assert output.strip() in (
        "inferenceservice.ome.io/svc created",
        "inferenceservice.ome.io/svc configured",
    )


def test_traffic_maps_answer_to_their_short_names_and_print_their_columns(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    tmap = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"service": "svc", "mode": "All", "entries": []},
    }
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(tmap))
    for name in ("trafficmap", "tm", "tmap"):
        header = control_plane.kubectl("get", name, "-n", namespace).stdout.splitlines()[0].split()
        assert header == ["NAME", "MODE", "PUBLISHED", "ROUTABLE", "OVERRIDE", "REASON", "AGE"]
    assert control_plane.kubectl("get", "wlc").returncode == 0
