"""Which InferenceService a poll asks about, from its `Host` and path.

Pure. The poll URL depends on the workload cluster's ingress (OME's capacity-polling
guide, "The report format"), and one reporter answers all three shapes:

- Gateway API with per-service subdomains: `http://<name>.<namespace>.<domain>/capacity`,
  by `Host`;
- Gateway API with the shared host: `http://<shared host>/<namespace>/<name>/capacity`,
  by path (the reporter's route forwards the path as sent);
- Kubernetes Ingress: `http://<name>.<namespace>.<domain>:<engine port>/capacity`, by
  `Host`, whatever the port.

A host matches a service when it is the host of the service's `status.url`, or, with
OME's default domain template `{{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }}`, when
its first two labels are the service's name and namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

ServiceKey = tuple[str, str]


def bare_host(host: str) -> str:
    """The `Host` header without its port, lower case, without a trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):
        host = host.partition("]")[0] + "]"
    else:
        host = host.rpartition(":")[0] if host.count(":") == 1 else host
    return host.rstrip(".")


@dataclass(frozen=True)
class ServiceIndex:
    """The services a reporter knows, and the hosts of their `status.url`."""

    keys: frozenset[ServiceKey] = frozenset()
    by_host: Mapping[str, ServiceKey] = field(default_factory=dict)

    @classmethod
    def of(cls, isvcs: Iterable[Mapping[str, Any]]) -> ServiceIndex:
        keys: set[ServiceKey] = set()
        by_host: dict[str, ServiceKey] = {}
        for isvc in isvcs:
            meta = isvc.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            keys.add(key)
            url = (isvc.get("status") or {}).get("url")
            if isinstance(url, str) and url:
                parts = urlsplit(url)
                # only a URL at `/` names the service by its host alone
                if parts.hostname and parts.path in ("", "/"):
                    by_host[bare_host(parts.hostname)] = key
        return cls(frozenset(keys), by_host)


def service_for(index: ServiceIndex, host: str, path: str, poll_path: str) -> ServiceKey | None:
    """The service a poll of `host` and `path` asks about, or None for none the index knows."""
    if path == poll_path:
        name = bare_host(host)
        key = index.by_host.get(name)
        if key is not None:
            return key
        labels = name.split(".")
        if len(labels) >= 3 and (labels[1], labels[0]) in index.keys:
            return labels[1], labels[0]
        return None
    if not path.endswith(poll_path):
        return None
    prefix = path[: len(path) - len(poll_path)].strip("/").split("/")
    if len(prefix) == 2 and (prefix[0], prefix[1]) in index.keys:
        return prefix[0], prefix[1]
    return None
