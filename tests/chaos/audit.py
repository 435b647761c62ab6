"""Who wrote what: kube-apiserver's audit log of every write to the objects a leader writes.

The watches (`invariants.MapRecorder`, `published.PublishedRecorder`) see every change of a
TrafficMap, route, Service and slice, but not who made it. The API server's audit log says
so: `AUDIT_FLAGS` has it record every create, update, patch and delete of those kinds (and
Leases) with its source address, answer code and the object it answered with, so a change
seen by a watch is matched to its request by resourceVersion. Each replica reaches the API
server through a `relay.Relay` with an address of its own, which is what tells them apart.
A Lease write also says who holds the Lease after it (`Request.holder`), and a published
object whom it was published for (`Request.owner`), so that writes can be set against the
tenures of sharded replicas (tests/shards); `AuditTail` reads a growing log a part at a time.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ome_routing.core.publication import SOURCE_NAME, SOURCE_NAMESPACE

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: RequestResponse
    verbs: [create, update, patch, delete, deletecollection]
    resources:
      - group: ome.io
        resources: [trafficmaps, trafficmaps/status]
      - group: gateway.networking.k8s.io
        resources: [httproutes, backendtlspolicies]
      - group: ""
        resources: [services]
      - group: discovery.k8s.io
        resources: [endpointslices]
      - group: coordination.k8s.io
        resources: [leases]
  - level: None
"""

#: the kinds a leader writes, by their audit resource name, as the watches call them
WATCHED = {
    "trafficmaps": "TrafficMap",
    "httproutes": "HTTPRoute",
    "services": "Service",
    "endpointslices": "EndpointSlice",
    "backendtlspolicies": "BackendTLSPolicy",
}


def audit_flags(directory: Path) -> tuple[str, ...]:
    """kube-apiserver flags that write the audit log to `directory / "audit.log"`."""
    policy = directory / "audit-policy.yaml"
    directory.mkdir(parents=True, exist_ok=True)
    policy.write_text(POLICY)
    return (f"--audit-policy-file={policy}", f"--audit-log-path={directory / 'audit.log'}")


@dataclass(frozen=True)
class Request:
    """One write request as the API server answered it."""

    at: float  # wall-clock seconds, when the answer was complete
    source: str
    verb: str
    kind: str  # TrafficMap, HTTPRoute, Service, EndpointSlice, BackendTLSPolicy or Lease
    namespace: str
    name: str
    subresource: str
    code: int
    #: the resourceVersion the object has after the write (None when it did not change)
    resource_version: str | None
    #: a Lease's `holderIdentity` after the write ("" released; None not answered with it)
    holder: str | None = None
    #: `namespace/name` of the InferenceService an object was published for (its labels)
    owner: str = ""

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300

    def __str__(self) -> str:
        return f"{self.verb} {self.kind} {self.namespace}/{self.name} -> {self.code}"


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _request(event: dict[str, Any]) -> Request | None:
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "")
    kind = WATCHED.get(resource) or ("Lease" if resource == "leases" else None)
    if kind is None or event.get("stage") != "ResponseComplete":
        return None
    answer = event.get("responseObject") or {}
    version = holder = None
    labels: dict[str, str] = {}
    if answer.get("kind") not in (None, "Status"):
        version = (answer.get("metadata") or {}).get("resourceVersion")
        labels = (answer.get("metadata") or {}).get("labels") or {}
        if kind == "Lease":
            holder = (answer.get("spec") or {}).get("holderIdentity") or ""
    owner = ""
    if SOURCE_NAME in labels:
        owner = f"{labels.get(SOURCE_NAMESPACE, '')}/{labels[SOURCE_NAME]}"
    return Request(
        at=_seconds(event["stageTimestamp"]),
        source=(event.get("sourceIPs") or [""])[-1],
        verb=event.get("verb", ""),
        kind=kind,
        namespace=ref.get("namespace", ""),
        name=ref.get("name", ""),
        subresource=ref.get("subresource", ""),
        code=int((event.get("responseStatus") or {}).get("code") or 0),
        resource_version=version,
        holder=holder,
        owner=owner,
    )


class AuditTail:
    """The audit log read as it grows: each `read()` parses only the lines added since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.requests: list[Request] = []
        self._offset = 0

    def read(self) -> list[Request]:
        """Every write request recorded so far, in the order the API server answered them."""
        if self.path.exists():
            with self.path.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
            complete = data.rfind(b"\n") + 1  # a line still being written waits
            self._offset += complete
            added = []
            for line in data[:complete].decode(errors="replace").splitlines():
                with contextlib.suppress(json.JSONDecodeError):
                    request = _request(json.loads(line)) if line.strip() else None
                    if request is not None:
                        added.append(request)
            if added:
                self.requests = sorted([*self.requests, *added], key=lambda r: r.at)
        return self.requests


def read_audit(path: Path) -> list[Request]:
    """Every write request recorded so far, in the order the API server answered them."""
    if not path.exists():
        return []
    requests = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:  # a line still being written
            continue
        request = _request(event)
        if request is not None:
            requests.append(request)
    return sorted(requests, key=lambda r: r.at)
