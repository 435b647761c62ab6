"""What the Kubernetes-backed reporter counts: the replicas of a service that can serve now.

Pure: raw Pod and InferenceService JSON in, values out; no I/O, no clock.

A pod belongs to an InferenceService by OME's pod labels: `ome.io/inferenceservice` holds
the service's name (in the pod's namespace), `component` its component (`engine`,
`decoder` or `router`). A pod counts when it is Ready (its `Ready` condition is `True`),
is not terminating (no `deletionTimestamp`), and, when health checks are on, its model
server last answered the health path with a 2xx. Worker pods of a multi-pod OMENative
Instance (`ome.io/runner: worker`) are not replicas of their own; the Instance's leader
stands for it.

A service with separate engine and decoder components serves only with both, so it
counts the pairs that can work together: the lower of the two counts. Router pods are not
counted: they forward to the engine and decoder, and do not add replicas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

ISVC_LABEL = "ome.io/inferenceservice"
COMPONENT_LABEL = "component"
RUNNER_LABEL = "ome.io/runner"
#: OME's pod annotation for the port of its runtime's health probes
PROBE_PORT_ANNOTATION = "runtime.ome.io/probe-port"

ServiceKey = tuple[str, str]
"""(namespace, name) of an InferenceService."""


class Component(Enum):
    ENGINE = "engine"
    DECODER = "decoder"
    ROUTER = "router"


@dataclass(frozen=True)
class PodView:
    """What the counting rules read of one pod."""

    namespace: str
    name: str
    uid: str
    service: str
    component: Component
    ready: bool
    terminating: bool
    #: `host:port` of the model server's health endpoint, or None without a pod IP
    health_address: str | None

    @property
    def service_key(self) -> ServiceKey:
        return self.namespace, self.service

    @property
    def candidate(self) -> bool:
        """Ready and not terminating: counts unless a health check says otherwise."""
        return self.ready and not self.terminating


def pod_view(raw: Mapping[str, Any], default_port: int) -> PodView | None:
    """The pod as the counting rules read it, or None when it is no replica of a service."""
    meta = raw.get("metadata") or {}
    labels = meta.get("labels") or {}
    service = labels.get(ISVC_LABEL)
    if not isinstance(service, str) or not service:
        return None
    if labels.get(RUNNER_LABEL) == "worker":
        return None
    try:
        component = Component(labels.get(COMPONENT_LABEL) or "engine")
    except ValueError:
        return None
    status = raw.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
        if isinstance(c, dict)
    )
    ip = status.get("podIP")
    address = None
    if isinstance(ip, str) and ip:
        port = _health_port(raw, default_port)
        address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    return PodView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        service=service,
        component=component,
        ready=ready,
        terminating=meta.get("deletionTimestamp") is not None,
        health_address=address,
    )


def _health_port(raw: Mapping[str, Any], default_port: int) -> int:
    """OME's probe-port annotation, else the first container's first declared port."""
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    declared = annotations.get(PROBE_PORT_ANNOTATION)
    if isinstance(declared, str) and declared.isdigit() and 0 < int(declared) < 65536:
        return int(declared)
    for container in (raw.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            number = port.get("containerPort")
            if isinstance(number, int) and 0 < number < 65536:
                return number
        break
    return default_port


def has_decoder(isvc: Mapping[str, Any]) -> bool:
    """Whether the service declares a decoder component (`spec.decoder`)."""
    spec = isvc.get("spec") or {}
    return isinstance(spec, dict) and spec.get("decoder") is not None


#: A pod's last health result: True for a 2xx within the timeout. Pods missing from the
#: mapping have not been checked yet and do not count.
HealthResults = Mapping[str, bool]


def serving(pod: PodView, health: HealthResults | None) -> bool:
    """Whether one pod counts: a candidate that, with health checks on, last passed."""
    if not pod.candidate:
        return False
    return health is None or health.get(pod.uid, False)


def servable(pods: Iterable[PodView], declared_decoder: bool, health: HealthResults | None) -> int:
    """The count a service reports: its serving engines, or its engine/decoder pairs.

    The service has pairs when its spec declares a decoder (`declared_decoder`) or when
    any of its pods is a decoder; `health` is None when health checks are off.
    """
    engines = decoders = 0
    decoder = declared_decoder
    for pod in pods:
        if pod.component is Component.DECODER:
            decoder = True
        if not serving(pod, health):
            continue
        if pod.component is Component.ENGINE:
            engines += 1
        elif pod.component is Component.DECODER:
            decoders += 1
    return min(engines, decoders) if decoder else engines


def health_targets(pods: Iterable[PodView]) -> dict[str, str]:
    """uid -> health address of the pods worth checking: candidates with an address."""
    return {p.uid: p.health_address for p in pods if p.candidate and p.health_address}
