"""The bodies of the objects the publisher writes for a `Publication`; pure.

The HTTPRoute, the backend Services, and, when the values ask for them, the
BackendTLSPolicies and (our hostname mode) the FQDN EndpointSlices. Each body carries
the values the API server would default (a backendRef's `group` and `kind`, a
Service port's `protocol` and `targetPort`), so that a body read back equals the one
written and a steady state makes no writes.

Backends, in OME's default mode, are `ExternalName` Services aimed at the home's
host. In `hostnameEndpointSlices` mode (ours; OME has no such key) each is a
selector-less Service with the port `http`, and an EndpointSlice of `addressType:
FQDN` holding the home's host, named `bounded(<service>-fqdn)`, labelled as OME
labels its IP slices (`kubernetes.io/service-name`, and
`endpointslice.kubernetes.io/managed-by: placement-endpoint`).
"""

from __future__ import annotations

from typing import Any

from ome_routing.core.endpoint import SYSTEM_CAS, EndpointConfig
from ome_routing.core.publication import (
    CLUSTER,
    MANAGED_BY_VALUE,
    Backend,
    Publication,
    base_labels,
    bounded_name,
    split_gateway,
)

__all__ = [
    "GATEWAY_GROUP",
    "endpoint_slice_body",
    "endpoint_slice_name",
    "route_body",
    "route_spec",
    "service_body",
    "tls_policy_body",
]

GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_VERSION = f"{GATEWAY_GROUP}/v1"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
PORT_NAME = "http"


def _meta(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": labels}


def _labels(config: EndpointConfig, source: tuple[str, str], cluster: str = "") -> dict[str, str]:
    labels = base_labels(config, *source)
    if cluster:
        labels[CLUSTER] = cluster
    return labels


def route_spec(config: EndpointConfig, plan: Publication) -> dict[str, Any]:
    """The route's spec: one parent, the global host, one rule at `/` with every backend."""
    gateway_namespace, gateway_name = split_gateway(config.global_gateway.strip())
    parent: dict[str, Any] = {"group": GATEWAY_GROUP, "kind": "Gateway", "name": gateway_name}
    if gateway_namespace:
        parent["namespace"] = gateway_namespace
    refs = []
    for backend in plan.backends:
        ref: dict[str, Any] = {
            "group": "",
            "kind": "Service",
            "name": backend.service,
            "namespace": plan.route_namespace,
            "port": config.backend_port,
            "weight": backend.weight,
        }
        if config.rewrite_hostname:
            ref["filters"] = [{"type": "URLRewrite", "urlRewrite": {"hostname": backend.host}}]
        refs.append(ref)
    return {
        "parentRefs": [parent],
        "hostnames": [plan.host],
        "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": refs}
        ],
    }


def route_body(
    config: EndpointConfig, plan: Publication, source: tuple[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_VERSION,
        "kind": "HTTPRoute",
        "metadata": _meta(plan.route_name, plan.route_namespace, _labels(config, source)),
        "spec": route_spec(config, plan),
    }


def service_body(
    config: EndpointConfig, plan: Publication, source: tuple[str, str], backend: Backend
) -> dict[str, Any]:
    port = config.backend_port
    spec: dict[str, Any]
    if config.hostname_endpoint_slices:
        spec = {
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP", "targetPort": port}],
        }
    else:
        spec = {
            "type": "ExternalName",
            "externalName": backend.host,
            "sessionAffinity": "None",
            "ports": [{"port": port, "protocol": "TCP", "targetPort": port}],
        }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(
            backend.service, plan.route_namespace, _labels(config, source, backend.cluster)
        ),
        "spec": spec,
    }


def endpoint_slice_name(backend: Backend) -> str:
    return bounded_name(f"{backend.service}-fqdn")


def endpoint_slice_body(
    config: EndpointConfig, plan: Publication, source: tuple[str, str], backend: Backend
) -> dict[str, Any]:
    labels = _labels(config, source, backend.cluster)
    labels[SERVICE_NAME_LABEL] = backend.service
    labels[SLICE_MANAGED_BY] = MANAGED_BY_VALUE
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": _meta(endpoint_slice_name(backend), plan.route_namespace, labels),
        "addressType": "FQDN",
        "endpoints": [{"addresses": [backend.host], "conditions": {"ready": True}}],
        "ports": [{"name": PORT_NAME, "port": config.backend_port, "protocol": "TCP"}],
    }


def tls_policy_body(
    config: EndpointConfig, plan: Publication, source: tuple[str, str], backend: Backend
) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_VERSION,
        "kind": "BackendTLSPolicy",
        "metadata": _meta(
            backend.service, plan.route_namespace, _labels(config, source, backend.cluster)
        ),
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": backend.service}],
            "validation": {"wellKnownCACertificates": SYSTEM_CAS, "hostname": backend.host},
        },
    }
