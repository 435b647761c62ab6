"""The demo's global-endpoint helpers: values with the endpoint block, counting and the table."""

from __future__ import annotations

from collections import Counter

import yaml

from ome_routing_dev.demo.traffic import (
    GLOBAL_HOST,
    expected_split,
    format_split,
    home_addresses,
    home_host,
    route_weights,
    tally,
    with_endpoint,
)


def test_the_endpoint_block_is_added_to_step_1s_values_without_changing_them() -> None:
    with open("examples/values.yaml") as handle:
        step1 = yaml.safe_load(handle)
    merged = with_endpoint(step1, "ome-gateway/global", 8080)
    config = merged["ome"]["multicluster"]["config"]
    assert config["endpoint"] == {
        "globalGateway": "ome-gateway/global",
        "backendPort": 8080,
        "globalHostTemplate": "{{ .Name }}.{{ .Namespace }}.global.example.com",
        "gatewayBackend": {"hostnameEndpointSlices": True},
    }
    assert config["routing"] == step1["ome"]["multicluster"]["config"]["routing"]
    assert "endpoint" not in step1["ome"]["multicluster"]["config"]


def test_hosts_follow_the_guides_names() -> None:
    assert home_host("worker-a") == "qwen3-0-6b.qwen3-0-6b.worker-a.example.com"
    assert GLOBAL_HOST == "qwen3-0-6b.qwen3-0-6b.global.example.com"


def test_each_home_gets_its_own_loopback_address_in_one_slash_24() -> None:
    addresses = home_addresses(["worker-a", "worker-b"])
    a, b = addresses["worker-a"], addresses["worker-b"]
    assert a != b and a.startswith("127.") and a.rsplit(".", 1)[0] == b.rsplit(".", 1)[0]


def test_answers_are_counted_per_home_and_anything_else_by_status() -> None:
    answers = [(200, "served by worker-a"), (200, "served by worker-b"), (503, "no available")]
    assert tally(answers) == Counter({"worker-a": 1, "worker-b": 1, "HTTP 503": 1})


def test_a_weighted_round_robin_serves_the_weights_exactly() -> None:
    assert expected_split({"worker-a": 2, "worker-b": 1}, 300) == {"worker-a": 200, "worker-b": 100}
    assert expected_split({"worker-a": 1, "worker-b": 0}, 30) == {"worker-a": 30}
    assert expected_split({"worker-a": 0, "worker-b": 0}, 30) == {}


def test_the_split_table_puts_counts_next_to_weights() -> None:
    table = format_split(
        Counter({"worker-a": 200, "worker-b": 100}), {"worker-a": 2, "worker-b": 1}, 300
    )
    assert table.splitlines() == [
        "HOME        SERVED   SHARE   WEIGHT",
        "worker-a       200   66.7%   2 of 3",
        "worker-b       100   33.3%   1 of 3",
    ]


def test_route_weights_are_read_in_backend_order() -> None:
    route = {"spec": {"rules": [{"backendRefs": [{"weight": 2}, {"weight": 0}, {}]}]}}
    assert route_weights(route) == [2, 0, 1]
