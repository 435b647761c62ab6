"""The publisher's plan: OME's names and hashes, the backends, and every plan check."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import pytest

from ome_routing.core.endpoint import EndpointConfig
from ome_routing.core.hosttemplate import parse_host_template
from ome_routing.core.publication import (
    Backend,
    InvalidPlan,
    Publication,
    Source,
    backend_service_name,
    bounded_name,
    claim_for,
    parse_claim,
    plan_publication,
    route_name,
)

CONFIG = EndpointConfig(
    global_gateway="gateway-system/global",
    backend_port=80,
    host_template=parse_host_template("{{ .Name }}.{{ .Namespace }}.global.example.com"),
    rewrite_hostname=True,
)
SOURCE = Source("prod", "chat", {})


def an_entry(cluster: str, weight: int = 1, endpoint: str | None = None) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "endpoint": endpoint or f"http://chat.prod.{cluster}.example.com/",
        "weight": weight,
    }


def a_plan(
    *entries: dict[str, Any], config: EndpointConfig = CONFIG, source: Source = SOURCE
) -> Publication:
    spec = {"service": "chat", "entries": list(entries)}
    return plan_publication(source, "prod", "chat", spec, config)


def refusal(*entries: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(InvalidPlan) as raised:
        a_plan(*entries, **kwargs)
    return str(raised.value)


class TestNames:
    def test_the_route_is_named_after_the_service(self) -> None:
        assert route_name(CONFIG, "prod", "chat") == "chat-global"

    def test_a_shared_route_namespace_adds_a_hash_of_the_source(self) -> None:
        """The guide's example: `chat` in `prod` gets `chat-ba4cb5d6-global`."""
        assert route_name(replace(CONFIG, route_namespace="gateways"), "prod", "chat") == (
            "chat-ba4cb5d6-global"
        )

    def test_a_route_namespace_equal_to_the_services_adds_nothing(self) -> None:
        assert (
            route_name(replace(CONFIG, route_namespace=" prod "), "prod", "chat") == "chat-global"
        )

    def test_backend_service_names_hash_the_nul_joined_identity(self) -> None:
        name = backend_service_name("prod", "chat", "worker-a")
        assert name == "tmb-b70ae8415bbe92d52fe7db87e85f63cf0fd52863ced1dd233b54"
        digest = hashlib.sha256(
            b"gateway-api-trafficmap-backend/v2\x00prod\x00chat\x00worker-a"
        ).hexdigest()
        assert name == "tmb-" + digest[:52] and len(name) == 56

    def test_a_name_that_fits_is_kept(self) -> None:
        assert bounded_name("a" * 63) == "a" * 63

    def test_a_long_name_becomes_a_hash_and_its_last_54_characters(self) -> None:
        long = "x" * 60 + "-global"
        bounded = bounded_name(long)
        digest = hashlib.sha256(long.encode()).hexdigest()[:8]
        expected_hash = "a" + digest[1:] if digest[0].isdigit() else digest
        assert bounded == f"{expected_hash}-{long[-54:]}"
        assert len(bounded) == 63

    def test_a_name_starting_with_a_digit_gets_a_letter(self) -> None:
        assert bounded_name("9chat-global") == "a9chat-global"

    def test_claims_name_the_route_and_read_back(self) -> None:
        claim = claim_for("prod", "chat-global")
        assert claim == "v1:httproute:prod/chat-global"
        assert parse_claim(claim) == ("prod", "chat-global")
        assert parse_claim("v2:httproute:prod/chat-global") is None
        assert parse_claim("v1:httproute:prod/a/b") is None


class TestPlan:
    def test_backends_are_sorted_by_cluster_with_weights_verbatim(self) -> None:
        plan = a_plan(an_entry("worker-b", 0), an_entry("worker-a", 7))
        assert plan == Publication(
            "prod",
            "chat-global",
            publish=True,
            host="chat.prod.global.example.com",
            backends=(
                Backend(
                    "worker-a",
                    "chat.prod.worker-a.example.com",
                    7,
                    backend_service_name("prod", "chat", "worker-a"),
                ),
                Backend(
                    "worker-b",
                    "chat.prod.worker-b.example.com",
                    0,
                    backend_service_name("prod", "chat", "worker-b"),
                ),
            ),
        )

    def test_an_all_zero_table_is_published_as_it_is(self) -> None:
        plan = a_plan(an_entry("worker-a", 0), an_entry("worker-b", 0))
        assert [b.weight for b in plan.backends] == [0, 0]

    def test_the_backend_host_drops_the_port_and_the_path(self) -> None:
        plan = a_plan(an_entry("worker-a", endpoint="https://chat.example.com:8443/v1"))
        assert plan.backends[0].host == "chat.example.com"

    @pytest.mark.parametrize(
        "config",
        [
            replace(CONFIG, global_gateway=""),
            replace(CONFIG, global_gateway="  "),
            replace(CONFIG, backend_port=0),
            replace(CONFIG, host_template=None),
        ],
    )
    def test_no_gateway_port_or_host_is_a_withdrawal(self, config: EndpointConfig) -> None:
        plan = a_plan(an_entry("worker-a"), config=config)
        assert plan == Publication("prod", "chat-global", publish=False)

    def test_the_annotation_names_the_host_without_a_template(self) -> None:
        source = Source("prod", "chat", {"ome.io/global-host": "*.chat.example.com"})
        plan = a_plan(
            an_entry("worker-a"), config=replace(CONFIG, host_template=None), source=source
        )
        assert plan.publish and plan.host == "*.chat.example.com"


class TestPlanChecks:
    """OME's `InvalidPlan` messages, in its order."""

    def test_a_legacy_finalizer_comes_first(self) -> None:
        source = Source("prod", "chat", {}, ("ome.io/placement-endpoint",))
        assert refusal(an_entry("worker-a"), source=source) == (
            'InferenceService prod/chat still has legacy endpoint finalizer "ome.io/placement-endpoint"; '
            "complete its cleanup before publishing its TrafficMap"
        )

    def test_a_map_that_does_not_name_its_service(self) -> None:
        with pytest.raises(InvalidPlan) as raised:
            plan_publication(SOURCE, "prod", "chat", {"service": "other"}, CONFIG)
        assert (
            str(raised.value) == "TrafficMap prod/chat does not identify InferenceService prod/chat"
        )

    @pytest.mark.parametrize(
        ("host", "message"),
        [
            ("10.0.0.1", 'global hostname: hostname "10.0.0.1" must not be an IP address'),
            ("*.10.0.0.1", 'global hostname: hostname "10.0.0.1" must not be an IP address'),
            (
                "Chat.example.com",
                'global hostname: hostname "Chat.example.com" is invalid: a lowercase RFC 1123 '
                "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
                "start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
        ],
    )
    def test_the_global_host_must_be_a_lowercase_subdomain_and_not_an_ip(
        self, host: str, message: str
    ) -> None:
        source = Source("prod", "chat", {"ome.io/global-host": host})
        assert refusal(an_entry("worker-a"), source=source) == message

    @pytest.mark.parametrize(
        ("gateway", "message"),
        [
            (" gw", 'Gateway API global gateway reference " gw" is not canonical'),
            (
                "a/b/c",
                'Gateway API global gateway reference "a/b/c" must be a name or namespace/name',
            ),
            (
                "A_b/gw",
                'Gateway API global gateway namespace "A_b" is invalid: a lowercase RFC 1123 label',
            ),
            (
                "ns/GW",
                'Gateway API global gateway name "GW" is invalid: a lowercase RFC 1123 subdomain',
            ),
        ],
    )
    def test_the_gateway_reference_is_checked(self, gateway: str, message: str) -> None:
        assert refusal(
            an_entry("worker-a"), config=replace(CONFIG, global_gateway=gateway)
        ).startswith(message)

    def test_tls_needs_the_system_cas(self) -> None:
        config = replace(CONFIG, tls_enabled=True, tls_ca_certificates="Custom")
        assert refusal(an_entry("worker-a"), config=config) == (
            'Gateway API backend TLS well-known CA certificates "Custom" are unsupported'
        )

    def test_at_most_16_backends(self) -> None:
        entries = [an_entry(f"worker-{i}") for i in range(17)]
        assert refusal(*entries) == (
            "TrafficMap has 17 entries, Gateway API HTTPRoute rules support at most 16 backendRefs"
        )

    @pytest.mark.parametrize(
        ("entries", "message"),
        [
            ([an_entry("")], "TrafficMap entry cluster must not be empty"),
            (
                [an_entry("Worker")],
                'TrafficMap entry cluster "Worker" is invalid: a lowercase RFC 1123 subdomain',
            ),
            (
                [an_entry("worker-a"), an_entry("worker-a")],
                'TrafficMap contains more than one entry for cluster "worker-a"',
            ),
            (
                [{"cluster": "worker-a", "weight": 1}],
                'TrafficMap entry "worker-a" has no valid endpoint',
            ),
            (
                [an_entry("worker-a", 1_000_001)],
                'TrafficMap entry "worker-a" weight 1000001 must be between 0 and 1000000',
            ),
            (
                [an_entry("worker-a", -1)],
                'TrafficMap entry "worker-a" weight -1 must be between 0 and 1000000',
            ),
            (
                [an_entry("worker-a", endpoint="http://127.0.0.1:8080/")],
                'TrafficMap entry "worker-a" backend hostname: hostname "127.0.0.1" must not be an IP address',
            ),
            (
                [an_entry("worker-a", endpoint="http://*.example.com/")],
                'TrafficMap entry "worker-a" backend hostname: hostname "*.example.com" is invalid',
            ),
        ],
    )
    def test_each_entry_is_checked(self, entries: list[dict[str, Any]], message: str) -> None:
        assert refusal(*entries).startswith(message)
