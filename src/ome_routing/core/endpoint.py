"""The publisher's chart values: `endpoint.*` and `routing.publisher.*`, with OME's checks.

`load_endpoint` reads the `endpoint` block by type (a value of the wrong type fails the
load, as OME's JSON decoding does); `endpoint_problems` gives OME's collected startup
errors for it (port, gateway, TLS, EndpointSlices), in OME's order, to be joined with the
duration errors; `publisher_problem` is OME's check of the selected publisher, made
once the rest has passed. The host template is parsed at load time
(`core.hosttemplate`), so an unsupported one stops the controller at startup.

`hostnameEndpointSlices` is this project's own key (OME has none): backends as
selector-less Services with an FQDN EndpointSlice holding the home's host, for
gateways that refuse `ExternalName` Services (Traefik). It is a gateway backend
feature like OME's, so it needs `globalGateway` too, and it cannot be combined with
OME's IP `endpointSlices`, which keep the Services `ExternalName`.

Defaults are the chart's: everything empty, 0 or false, so that publishing is off
until a gateway and a port are set (OME's `IsEnabled`).

Errors: `CapacityRuleError` from `core.fields` for a value of the wrong type, and
`HostTemplateError` (a `ValueError`) for a template this build cannot render as OME.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ome_routing.core.fields import (
    duration_text,
    go_q,
    read_bool,
    read_mapping,
    read_string,
    read_string_map,
    read_whole_number,
)
from ome_routing.core.hosttemplate import HostTemplate, parse_host_template

__all__ = [
    "BUILTIN_PUBLISHER",
    "ENDPOINT_KEYS",
    "GATEWAY_BACKEND_KEYS",
    "REFRESH_FIELD",
    "EndpointConfig",
    "endpoint_problems",
    "load_endpoint",
    "publisher_problem",
]

#: The built-in publisher's name, and the durable identity in each map's journal.
BUILTIN_PUBLISHER = "gatewayapi"
SYSTEM_CAS = "System"
REFRESH_FIELD = "endpoint.gatewayBackend.endpointSlices.addressRefreshInterval"

ENDPOINT_KEYS = (
    "globalGateway",
    "backendPort",
    "globalHostTemplate",
    "routeNamespace",
    "labels",
    "gatewayBackend",
)
GATEWAY_BACKEND_KEYS = ("rewriteHostname", "tls", "endpointSlices", "hostnameEndpointSlices")


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """`ome.multicluster.config.endpoint`, read by type."""

    #: The Gateway for the routes, `namespace/name` or `name` (in the route's namespace).
    #: Empty (the default) publishes nothing.
    global_gateway: str = ""
    #: The workload clusters' Gateway port; required with `global_gateway`. 0 by default.
    backend_port: int = 0
    #: The parsed `globalHostTemplate`; None (the default, empty) leaves only the
    #: `ome.io/global-host` annotation to name a host.
    host_template: HostTemplate | None = None
    #: All routes and their objects in one namespace; empty: the service's namespace.
    route_namespace: str = ""
    #: Operator labels on every object; the publisher's own labels win over them.
    labels: tuple[tuple[str, str], ...] = ()
    #: A URLRewrite filter per backend setting `Host` to its workload hostname.
    rewrite_hostname: bool = False
    tls_enabled: bool = False
    tls_ca_certificates: str = ""
    endpoint_slices_enabled: bool = False
    address_refresh_interval: str = ""
    #: Ours: selector-less Services with FQDN EndpointSlices instead of ExternalName.
    hostname_endpoint_slices: bool = False

    @property
    def enabled(self) -> bool:
        """OME publishes only with a gateway and a positive port; otherwise it withdraws."""
        return self.global_gateway.strip() != "" and self.backend_port > 0

    def host_for(self, name: str, namespace: str, annotation: str | None) -> str:
        """The global host: the annotation (trimmed) wins, else the template; "" for none."""
        if annotation is not None and annotation.strip():
            return annotation.strip()
        if self.host_template is None:
            return ""
        return self.host_template.render(name, namespace)


def _optional(block: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any]:
    value = block.get(key)
    return {} if value is None else read_mapping(value, field)


def _string(block: Mapping[str, Any], key: str, field: str) -> str:
    value = block.get(key)
    return "" if value is None else read_string(value, field)


def _bool(block: Mapping[str, Any], key: str, field: str) -> bool:
    value = block.get(key)
    return False if value is None else read_bool(value, field)


def load_endpoint(value: object) -> EndpointConfig:
    """Read `endpoint` by type; raises `CapacityRuleError` or `HostTemplateError`."""
    block = {} if value is None else read_mapping(value, "endpoint")
    backend = _optional(block, "gatewayBackend", "endpoint.gatewayBackend")
    tls = _optional(backend, "tls", "endpoint.gatewayBackend.tls")
    slices = _optional(backend, "endpointSlices", "endpoint.gatewayBackend.endpointSlices")
    port_value = block.get("backendPort")
    port = 0 if port_value is None else read_whole_number(port_value, "endpoint.backendPort")
    template_text = _string(block, "globalHostTemplate", "endpoint.globalHostTemplate")
    template = parse_host_template(template_text) if template_text.strip() else None
    return EndpointConfig(
        global_gateway=_string(block, "globalGateway", "endpoint.globalGateway"),
        backend_port=port,
        host_template=template,
        route_namespace=_string(block, "routeNamespace", "endpoint.routeNamespace"),
        labels=read_string_map(block.get("labels"), "endpoint.labels"),
        rewrite_hostname=_bool(
            backend, "rewriteHostname", "endpoint.gatewayBackend.rewriteHostname"
        ),
        tls_enabled=_bool(tls, "enabled", "endpoint.gatewayBackend.tls.enabled"),
        tls_ca_certificates=_string(
            tls, "wellKnownCACertificates", "endpoint.gatewayBackend.tls.wellKnownCACertificates"
        ),
        endpoint_slices_enabled=_bool(
            slices, "enabled", "endpoint.gatewayBackend.endpointSlices.enabled"
        ),
        address_refresh_interval=duration_text(slices.get("addressRefreshInterval"), REFRESH_FIELD),
        hostname_endpoint_slices=_bool(
            backend, "hostnameEndpointSlices", "endpoint.gatewayBackend.hostnameEndpointSlices"
        ),
    )


def endpoint_problems(endpoint: EndpointConfig) -> list[str]:
    """OME's collected checks of the `endpoint` block, in its order (after the durations)."""
    problems: list[str] = []
    port = endpoint.backend_port
    gateway = endpoint.global_gateway.strip()
    if port < 0 or port > 65535:
        problems.append(f"endpoint.backendPort: {port} is not a valid port")
    if gateway and port <= 0:
        problems.append(
            "endpoint.backendPort: must be set when endpoint.globalGateway is configured "
            f"({go_q(endpoint.global_gateway)})"
        )
    backend_features = (
        endpoint.rewrite_hostname
        or endpoint.tls_enabled
        or endpoint.endpoint_slices_enabled
        or endpoint.hostname_endpoint_slices
    )
    if backend_features and not gateway:
        problems.append(
            "endpoint.globalGateway: must be set when gateway backend features are enabled"
        )
    if endpoint.tls_enabled and endpoint.tls_ca_certificates != SYSTEM_CAS:
        problems.append(
            "endpoint.gatewayBackend.tls.wellKnownCACertificates: "
            f"{go_q(endpoint.tls_ca_certificates)} must be {go_q(SYSTEM_CAS)} when enabled"
        )
    if not endpoint.tls_enabled and endpoint.tls_ca_certificates.strip():
        problems.append(
            "endpoint.gatewayBackend.tls.enabled: must be true when TLS settings are supplied"
        )
    refresh = endpoint.address_refresh_interval.strip()
    if endpoint.endpoint_slices_enabled and not refresh:
        problems.append(f"{REFRESH_FIELD}: must be set when enabled")
    if not endpoint.endpoint_slices_enabled and refresh:
        problems.append(
            "endpoint.gatewayBackend.endpointSlices.enabled: must be true when EndpointSlice "
            "settings are supplied"
        )
    if endpoint.hostname_endpoint_slices and endpoint.endpoint_slices_enabled:
        problems.append(
            "endpoint.gatewayBackend.hostnameEndpointSlices: must not be true when "
            "endpoint.gatewayBackend.endpointSlices.enabled is true (the two backend modes exclude "
            "each other)"
        )
    return problems


def publisher_problem(name: str, options: tuple[tuple[str, str], ...]) -> str | None:
    """OME's construction of the selected publisher: only the built-in one exists here."""
    if name in ("", BUILTIN_PUBLISHER):
        if options:
            keys = ", ".join(key for key, _ in options)
            return (
                "configure built-in Gateway API publisher: Gateway API publisher does not "
                f"accept global options: {keys}"
            )
        return None
    return (
        f"TrafficMap publisher {go_q(name)} is not compiled into this manager "
        f"(available: [{BUILTIN_PUBLISHER}])"
    )
