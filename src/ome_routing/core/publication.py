"""The publisher's plan for one TrafficMap: names, hashes, checks; pure.

`plan_publication` turns a map, its InferenceService and the `endpoint` values into
either a `Publication` (the route's key and host, and one `Backend` per entry) or a
withdrawal (the same route key with `publish=False`), checking in OME's order and
raising `InvalidPlan` with OME's message at the first problem. The bodies of the
objects are built from a plan by `core.publication_objects`.

Names follow OME's built-in `gatewayapi` publisher:

- every object lives in `routeNamespace` (trimmed), else the service's namespace;
- the route is `bounded(<base>-global)`, where the base is the service's name, or,
  when the route namespace differs from the service's, `<name>-<8 hex of
  sha256("<ns>/<name>")>`;
- each backend Service is `tmb-` and the first 52 hex digits of
  sha256("gateway-api-trafficmap-backend/v2" NUL ns NUL name NUL cluster);
- `bounded` keeps a DNS-1035 label: a name over 63 characters becomes 8 hex digits of
  its sha256 (a leading digit made `a`), a hyphen and its last 54 characters, and a
  name that does not start with a letter gets an `a` in front.

Errors: `InvalidPlan` (a `ValueError`): the map cannot be published as it stands; it is
terminal (the publisher waits for a change).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ome_routing.core.endpoint import SYSTEM_CAS, EndpointConfig
from ome_routing.core.names import (
    dns1035_label_problems,
    dns1123_label_problems,
    dns1123_subdomain_problems,
    is_ip,
    label_value_problems,
    port_problems,
)
from ome_routing.core.quoting import quote

__all__ = [
    "CLAIM_PREFIX",
    "GLOBAL_HOST_ANNOTATION",
    "LEGACY_FINALIZER",
    "MAX_BACKEND_REFS",
    "MAX_WEIGHT",
    "Backend",
    "InvalidPlan",
    "Publication",
    "Source",
    "backend_service_name",
    "bounded_name",
    "claim_for",
    "gateway_key",
    "parse_claim",
    "plan_publication",
    "route_name",
    "route_namespace",
    "split_gateway",
]

GLOBAL_HOST_ANNOTATION = "ome.io/global-host"
LEGACY_FINALIZER = "ome.io/placement-endpoint"
CLAIM_PREFIX = "v1:httproute:"
#: Gateway API allows 16 backendRefs in a rule, each weight at most 1,000,000.
MAX_BACKEND_REFS = 16
MAX_WEIGHT = 1_000_000
_BACKEND_DOMAIN = "gateway-api-trafficmap-backend/v2"
_MAX_NAME = 63


class InvalidPlan(ValueError):
    """The map cannot be published as it stands; the message is OME's."""


@dataclass(frozen=True, slots=True)
class Source:
    """The InferenceService a map belongs to, as the publisher reads it."""

    namespace: str
    name: str
    annotations: Mapping[str, str]
    finalizers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Backend:
    """One entry of the map as a route backend."""

    cluster: str
    #: the host of the entry's endpoint, without a port
    host: str
    weight: int
    service: str


@dataclass(frozen=True, slots=True)
class Publication:
    """What to publish for a map (or, with `publish` False, to withdraw)."""

    route_namespace: str
    route_name: str
    publish: bool
    host: str = ""
    #: sorted by cluster
    backends: tuple[Backend, ...] = ()

    @property
    def claim(self) -> str:
        return claim_for(self.route_namespace, self.route_name)


# --- names -----------------------------------------------------------------------------


def _truncate(name: str) -> str:
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    if digest[0].isdigit():
        digest = "a" + digest[1:]
    return f"{digest}-{name[-(_MAX_NAME - 9) :]}"


def bounded_name(name: str) -> str:
    """OME's bounded resource name: at most 63 characters, starting with a letter."""
    bounded = _truncate(name)
    if bounded and not ("a" <= bounded[0] <= "z"):
        bounded = _truncate("a" + bounded)
    return bounded


def route_namespace(config: EndpointConfig, source_namespace: str) -> str:
    return config.route_namespace.strip() or source_namespace


def _base_name(config: EndpointConfig, namespace: str, name: str) -> str:
    if route_namespace(config, namespace) != namespace:
        digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:8]
        return f"{name}-{digest}"
    return name


def route_name(config: EndpointConfig, namespace: str, name: str) -> str:
    return bounded_name(_base_name(config, namespace, name) + "-global")


def backend_service_name(namespace: str, name: str, cluster: str) -> str:
    joined = "\x00".join((_BACKEND_DOMAIN, namespace, name, cluster))
    return "tmb-" + hashlib.sha256(joined.encode()).hexdigest()[:52]


def claim_for(namespace: str, name: str) -> str:
    return f"{CLAIM_PREFIX}{namespace}/{name}"


def parse_claim(claim: str) -> tuple[str, str] | None:
    """The route key of a claim this publisher writes, or None for any other text."""
    if not claim.startswith(CLAIM_PREFIX):
        return None
    rest = claim[len(CLAIM_PREFIX) :]
    if rest.count("/") != 1:
        return None
    namespace, name = rest.split("/")
    if dns1123_label_problems(namespace) or dns1123_subdomain_problems(name):
        return None
    return namespace, name


def split_gateway(reference: str) -> tuple[str, str]:
    """`namespace/name` or `name` (namespace "")."""
    namespace, slash, name = reference.partition("/")
    return (namespace, name) if slash else ("", namespace)


def gateway_key(config: EndpointConfig, route_ns: str) -> tuple[str, str]:
    """The Gateway the routes attach to; a bare name is in the route's namespace."""
    namespace, name = split_gateway(config.global_gateway.strip())
    return namespace or route_ns, name


def host_only(host: str) -> str:
    """The host of `host[:port]`."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


# --- checks ----------------------------------------------------------------------------


def _joined(problems: Sequence[str]) -> str:
    return "; ".join(problems)


def _hostname_problem(host: str, wildcard: bool) -> str | None:
    if wildcard and host.startswith("*."):
        host = host[2:]
    if is_ip(host):
        return f"hostname {quote(host)} must not be an IP address"
    problems = dns1123_subdomain_problems(host)
    if problems:
        return f"hostname {quote(host)} is invalid: {_joined(problems)}"
    return None


def _config_problem(config: EndpointConfig) -> str | None:
    port = config.backend_port
    if port_problems(port):
        return f"Gateway API backend port {port} is invalid: {_joined(port_problems(port))}"
    reference = config.global_gateway.strip()
    if reference != config.global_gateway:
        return (
            f"Gateway API global gateway reference {quote(config.global_gateway)} is not canonical"
        )
    if reference.count("/") > 1:
        return f"Gateway API global gateway reference {quote(reference)} must be a name or namespace/name"
    namespace, name = split_gateway(reference)
    if "/" in reference and dns1123_label_problems(namespace):
        problems = _joined(dns1123_label_problems(namespace))
        return f"Gateway API global gateway namespace {quote(namespace)} is invalid: {problems}"
    if dns1123_subdomain_problems(name):
        problems = _joined(dns1123_subdomain_problems(name))
        return f"Gateway API global gateway name {quote(name)} is invalid: {problems}"
    if config.tls_enabled and config.tls_ca_certificates != SYSTEM_CAS:
        return (
            "Gateway API backend TLS well-known CA certificates "
            f"{quote(config.tls_ca_certificates)} are unsupported"
        )
    return None


def _labels_problem(labels: Mapping[str, str]) -> str | None:
    for key in sorted(labels):
        problems = label_value_problems(labels[key])
        if problems:
            return (
                f"Gateway API resource label {quote(key)} value {quote(labels[key])} is invalid: "
                f"{_joined(problems)}"
            )
    return None


def _entry_host(entry: Mapping[str, Any]) -> str:
    endpoint = entry.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        return ""
    try:
        netloc = urlsplit(endpoint).netloc
    except ValueError:
        return ""
    return netloc.rpartition("@")[2]


def plan_publication(
    source: Source,
    tmap_namespace: str,
    tmap_name: str,
    spec: Mapping[str, Any],
    config: EndpointConfig,
) -> Publication:
    """The plan for one map, checked in OME's order; raises `InvalidPlan`."""
    key = f"{source.namespace}/{source.name}"
    if LEGACY_FINALIZER in source.finalizers:
        raise InvalidPlan(
            f"InferenceService {key} still has legacy endpoint finalizer {quote(LEGACY_FINALIZER)}; "
            "complete its cleanup before publishing its TrafficMap"
        )
    if (
        tmap_namespace != source.namespace
        or tmap_name != source.name
        or spec.get("service") != source.name
    ):
        raise InvalidPlan(
            f"TrafficMap {tmap_namespace}/{tmap_name} does not identify InferenceService {key}"
        )
    namespace = route_namespace(config, source.namespace)
    name = route_name(config, source.namespace, source.name)
    withdrawal = Publication(namespace, name, publish=False)
    if not config.enabled:
        return withdrawal
    host = config.host_for(
        source.name, source.namespace, source.annotations.get(GLOBAL_HOST_ANNOTATION)
    )
    if host == "":
        return withdrawal
    problem = _hostname_problem(host, wildcard=True)
    if problem is not None:
        raise InvalidPlan(f"global hostname: {problem}")
    problem = _config_problem(config) or _labels_problem(
        base_labels(config, source.namespace, source.name)
    )
    if problem is not None:
        raise InvalidPlan(problem)
    entries = [e for e in spec.get("entries") or [] if isinstance(e, Mapping)]
    if len(entries) > MAX_BACKEND_REFS:
        raise InvalidPlan(
            f"TrafficMap has {len(entries)} entries, Gateway API HTTPRoute rules support at most "
            f"{MAX_BACKEND_REFS} backendRefs"
        )
    backends: list[Backend] = []
    clusters: set[str] = set()
    services: dict[str, str] = {}
    for entry in entries:
        backends.append(_backend(source, entry, clusters, services))
    backends.sort(key=lambda backend: backend.cluster)
    return Publication(namespace, name, publish=True, host=host, backends=tuple(backends))


def _backend(
    source: Source, entry: Mapping[str, Any], clusters: set[str], services: dict[str, str]
) -> Backend:
    cluster = str(entry.get("cluster") or "")
    if cluster == "":
        raise InvalidPlan("TrafficMap entry cluster must not be empty")
    problems = dns1123_subdomain_problems(cluster)
    if problems:
        raise InvalidPlan(
            f"TrafficMap entry cluster {quote(cluster)} is invalid: {_joined(problems)}"
        )
    if cluster in clusters:
        raise InvalidPlan(f"TrafficMap contains more than one entry for cluster {quote(cluster)}")
    clusters.add(cluster)
    netloc = _entry_host(entry)
    if netloc == "":
        raise InvalidPlan(f"TrafficMap entry {quote(cluster)} has no valid endpoint")
    weight = entry.get("weight")
    weight = weight if isinstance(weight, int) and not isinstance(weight, bool) else 0
    if weight < 0 or weight > MAX_WEIGHT:
        raise InvalidPlan(
            f"TrafficMap entry {quote(cluster)} weight {weight} must be between 0 and {MAX_WEIGHT}"
        )
    host = host_only(netloc)
    problem = _hostname_problem(host, wildcard=False)
    if problem is not None:
        raise InvalidPlan(f"TrafficMap entry {quote(cluster)} backend hostname: {problem}")
    service = backend_service_name(source.namespace, source.name, cluster)
    problems = dns1035_label_problems(service)
    if problems:
        raise InvalidPlan(
            f"TrafficMap entry {quote(cluster)} generates invalid backend Service name "
            f"{quote(service)}: {_joined(problems)}"
        )
    if service in services:
        raise InvalidPlan(
            f"TrafficMap entries {quote(services[service])} and {quote(cluster)} generate the same "
            f"backend Service name {quote(service)}"
        )
    services[service] = cluster
    return Backend(cluster, host, weight, service)


# --- labels ----------------------------------------------------------------------------

MANAGED_BY = "ome.io/managed-by"
MANAGED_BY_VALUE = "placement-endpoint"
SOURCE_NAME = "ome.io/placement-endpoint-isvc"
SOURCE_NAMESPACE = "ome.io/placement-endpoint-isvc-namespace"
CLUSTER = "ome.io/placement-cluster"


def base_labels(config: EndpointConfig, namespace: str, name: str) -> dict[str, str]:
    """OME's ownership labels on every object, over the operator's (which can't override them)."""
    labels = dict(config.labels)
    labels[MANAGED_BY] = MANAGED_BY_VALUE
    labels[SOURCE_NAME] = name
    labels[SOURCE_NAMESPACE] = namespace
    return labels


def source_selector(namespace: str, name: str) -> dict[str, str]:
    """The labels that identify every object published for one service."""
    return {MANAGED_BY: MANAGED_BY_VALUE, SOURCE_NAME: name, SOURCE_NAMESPACE: namespace}


def owned_by(obj: Mapping[str, Any], namespace: str, name: str) -> bool:
    """OME's strict ownership: all three labels present and naming this service."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in source_selector(namespace, name).items())
