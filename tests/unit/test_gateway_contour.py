"""What the local Contour gateway is told: loopback only, OME's default backends accepted,
the kinds Contour v1.33 cannot watch on the v1.4.0 CRDs off, and Envoy's port mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ome_routing_dev.devcluster.gateway_contour import (
    DISABLED_FEATURES,
    ContourGateway,
    _route_weights,
    envoy_port_of,
)


class _Plane:
    kubeconfig = Path("/tmp/kubeconfig")


def gateway(tmp_path: Path) -> ContourGateway:
    running = ContourGateway(_Plane(), {}, dir=tmp_path, port=38000)  # type: ignore[arg-type]
    return running


@pytest.mark.parametrize(
    ("listener", "envoy"), [(80, 8080), (30000, 38000), (60000, 2465), (57535, 65535)]
)
def test_envoy_serves_a_listener_on_its_port_plus_8000_wrapping_past_65535(
    listener: int, envoy: int
) -> None:
    assert envoy_port_of(listener) == envoy


def test_the_gateway_listener_is_the_port_envoy_listens_on_less_8000(tmp_path: Path) -> None:
    running = gateway(tmp_path)
    assert running.listener_port == 30000
    assert envoy_port_of(running.listener_port) == running.port


def test_contour_accepts_external_names_for_its_one_gateway(tmp_path: Path) -> None:
    config: dict[str, Any] = gateway(tmp_path).config(admin_port=41000)
    assert config["enableExternalNameService"] is True
    assert config["gateway"] == {"gatewayRef": {"namespace": "ome-gateway", "name": "global"}}
    assert config["network"] == {"admin-port": 41000}


def test_every_address_contour_is_given_is_loopback(tmp_path: Path) -> None:
    args = gateway(tmp_path).contour_args(xds=1, metrics=2, debug=3, stats=4)
    addresses = [a.split("=", 1)[1] for a in args if a.split("=", 1)[0].endswith("-address")]
    assert addresses and set(addresses) == {"127.0.0.1"}
    assert "--insecure" in args and "--disable-leader-election" in args
    assert [a for a in args if a.startswith("--disable-feature=")] == [
        f"--disable-feature={feature}" for feature in DISABLED_FEATURES
    ]
    assert set(DISABLED_FEATURES) == {"backendtlspolicies", "tlsroutes", "tcproutes"}


def test_a_route_is_read_as_its_clusters_weights_or_as_a_direct_answer() -> None:
    weighted = {"route": {"weighted_clusters": {"clusters": [
        {"name": "ns/tmb-a/80/da39a3ee5e", "weight": 2}, {"name": "ns/tmb-b/80/da39a3ee5e", "weight": 1},
    ]}}}  # fmt: skip
    assert _route_weights(weighted) == {"ns/tmb-a/80/da39a3ee5e": 2, "ns/tmb-b/80/da39a3ee5e": 1}
    assert _route_weights({"route": {"cluster": "ns/tmb-a/80/da39a3ee5e"}}) == {
        "ns/tmb-a/80/da39a3ee5e": 1
    }
    assert _route_weights({"direct_response": {"status": 500}}) == {}
