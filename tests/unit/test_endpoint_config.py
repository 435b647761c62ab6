"""The publisher's chart values (`endpoint.*`, `routing.publisher.*`) and OME's startup checks."""

from __future__ import annotations

from typing import Any

import pytest

from ome_routing.core.config import ConfigError, config_from_values

PREFIX = "invalid multi-cluster configuration: "


def values(endpoint: Any = None, publisher: Any = None, routing: bool = True) -> dict[str, Any]:
    config: dict[str, Any] = {"routing": {"enabled": routing}}
    if endpoint is not None:
        config["endpoint"] = endpoint
    if publisher is not None:
        config["routing"]["publisher"] = publisher
    return {"ome": {"multicluster": {"enabled": True, "role": "control-plane", "config": config}}}


def error(endpoint: Any = None, publisher: Any = None) -> str:
    with pytest.raises(ConfigError) as raised:
        config_from_values(values(endpoint, publisher))
    return str(raised.value)


GUIDE = {
    "globalGateway": "gateway-system/global",
    "backendPort": 80,
    "globalHostTemplate": "{{ .Name }}.{{ .Namespace }}.global.example.com",
    "gatewayBackend": {"rewriteHostname": True},
}


class TestValues:
    def test_the_chart_defaults_publish_nothing(self) -> None:
        endpoint = config_from_values(values()).endpoint
        assert not endpoint.enabled
        assert endpoint.host_for("chat", "prod", None) == ""

    def test_the_guides_values_publish_at_the_rendered_host(self) -> None:
        endpoint = config_from_values(values(GUIDE)).endpoint
        assert endpoint.enabled
        assert endpoint.rewrite_hostname
        assert endpoint.host_for("chat", "prod", None) == "chat.prod.global.example.com"

    def test_the_annotation_wins_over_the_template_trimmed(self) -> None:
        endpoint = config_from_values(values(GUIDE)).endpoint
        assert endpoint.host_for("chat", "prod", "  chat.global.example.com ") == (
            "chat.global.example.com"
        )
        assert endpoint.host_for("chat", "prod", "   ") == "chat.prod.global.example.com"

    def test_hostname_endpoint_slices_is_read(self) -> None:
        block = {**GUIDE, "gatewayBackend": {"hostnameEndpointSlices": True}}
        assert config_from_values(values(block)).endpoint.hostname_endpoint_slices

    def test_ome_ip_endpoint_slices_are_accepted_with_a_warning_that_none_are_written(
        self,
    ) -> None:
        backend = {"endpointSlices": {"enabled": True, "addressRefreshInterval": "1m"}}
        block = {"globalGateway": "gw", "backendPort": 80, "gatewayBackend": backend}
        config = config_from_values(values(block))
        assert config.endpoint.endpoint_slices_enabled
        assert config.warnings == (
            "endpoint.gatewayBackend.endpointSlices.enabled is true, but this build does not "
            "resolve workload clusters' Gateway addresses: backends stay ExternalName Services "
            "with no EndpointSlices (for gateways that refuse ExternalName, use "
            "endpoint.gatewayBackend.hostnameEndpointSlices)",
        )
        assert config_from_values(values(block, routing=False)).warnings == ()

    def test_an_unknown_endpoint_key_is_a_warning(self) -> None:
        config = config_from_values(values({**GUIDE, "gateway": "x"}))
        assert any(
            w.startswith("unknown multi-cluster setting endpoint.gateway ") for w in config.warnings
        )


class TestStartupChecks:
    """OME's collected checks (controllerconfig/multicluster.go), joined in its order."""

    @pytest.mark.parametrize(
        ("endpoint", "message"),
        [
            ({"backendPort": 70000}, "endpoint.backendPort: 70000 is not a valid port"),
            ({"backendPort": -1}, "endpoint.backendPort: -1 is not a valid port"),
            (
                {"globalGateway": "gw"},
                'endpoint.backendPort: must be set when endpoint.globalGateway is configured ("gw")',
            ),
            (
                {"gatewayBackend": {"rewriteHostname": True}},
                "endpoint.globalGateway: must be set when gateway backend features are enabled",
            ),
            (
                {"globalGateway": "  ", "gatewayBackend": {"hostnameEndpointSlices": True}},
                "endpoint.globalGateway: must be set when gateway backend features are enabled",
            ),
            (
                {
                    "globalGateway": "gw",
                    "backendPort": 443,
                    "gatewayBackend": {"tls": {"enabled": True}},
                },
                'endpoint.gatewayBackend.tls.wellKnownCACertificates: "" must be "System" when enabled',
            ),
            (
                {"gatewayBackend": {"tls": {"wellKnownCACertificates": "System"}}},
                "endpoint.gatewayBackend.tls.enabled: must be true when TLS settings are supplied",
            ),
            (
                {
                    "globalGateway": "gw",
                    "backendPort": 80,
                    "gatewayBackend": {"endpointSlices": {"enabled": True}},
                },
                "endpoint.gatewayBackend.endpointSlices.addressRefreshInterval: must be set when enabled",
            ),
            (
                {"gatewayBackend": {"endpointSlices": {"addressRefreshInterval": "1m"}}},
                "endpoint.gatewayBackend.endpointSlices.enabled: must be true when EndpointSlice "
                "settings are supplied",
            ),
            (
                {"gatewayBackend": {"endpointSlices": {"addressRefreshInterval": "1"}}},
                'endpoint.gatewayBackend.endpointSlices.addressRefreshInterval: "1" is not a '
                'duration (use forms like "30s", "5m")\n'
                "endpoint.gatewayBackend.endpointSlices.enabled: must be true when EndpointSlice "
                "settings are supplied",
            ),
        ],
    )
    def test_each_rule_has_omes_message(self, endpoint: dict[str, Any], message: str) -> None:
        assert error(endpoint) == PREFIX + message

    def test_every_problem_is_reported_joined_after_the_durations(self) -> None:
        endpoint = {
            "backendPort": 70000,
            "gatewayBackend": {"rewriteHostname": True, "tls": {"wellKnownCACertificates": "x"}},
        }
        assert error(endpoint) == PREFIX + "\n".join(
            [
                "endpoint.backendPort: 70000 is not a valid port",
                "endpoint.globalGateway: must be set when gateway backend features are enabled",
                "endpoint.gatewayBackend.tls.enabled: must be true when TLS settings are supplied",
            ]
        )

    def test_the_two_endpoint_slice_modes_exclude_each_other(self) -> None:
        backend = {
            "hostnameEndpointSlices": True,
            "endpointSlices": {"enabled": True, "addressRefreshInterval": "1m"},
        }
        assert error({"globalGateway": "gw", "backendPort": 80, "gatewayBackend": backend}) == (
            PREFIX + "endpoint.gatewayBackend.hostnameEndpointSlices: must not be true when "
            "endpoint.gatewayBackend.endpointSlices.enabled is true (the two backend modes "
            "exclude each other)"
        )

    def test_a_port_of_the_wrong_type_fails_to_load(self) -> None:
        assert error({"backendPort": "80"}).startswith(
            "load multi-cluster configuration: unable to parse multicluster config json: "
            'endpoint.backendPort must be a whole number, got "80"'
        )

    def test_an_unsupported_host_template_stops_the_controller_naming_it(self) -> None:
        assert error({"globalHostTemplate": "{{ .Name | upper }}.example.com"}) == (
            PREFIX + 'endpoint.globalHostTemplate "{{ .Name | upper }}.example.com": '
            '"{{ .Name | upper }}" is not supported (use only {{ .Name }} and {{ .Namespace }})'
        )


class TestPublisherSelection:
    @pytest.mark.parametrize("name", ["", "gatewayapi"])
    def test_an_empty_name_or_gatewayapi_selects_the_built_in_publisher(self, name: str) -> None:
        config_from_values(values(publisher={"name": name, "resyncInterval": "1m"}))

    def test_a_publisher_not_compiled_in_is_refused(self) -> None:
        assert error(publisher={"name": "istio", "resyncInterval": "1m"}) == (
            PREFIX + 'TrafficMap publisher "istio" is not compiled into this manager '
            "(available: [gatewayapi])"
        )

    def test_the_built_in_publisher_takes_no_global_options(self) -> None:
        publisher = {"resyncInterval": "1m", "options": {"zone": "a", "class": "b"}}
        assert error(publisher=publisher) == (
            PREFIX + "configure built-in Gateway API publisher: Gateway API publisher does not "
            "accept global options: class, zone"
        )
