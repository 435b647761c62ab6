"""What the publisher checks of the objects it reads, and its errors (`PublishError`).

Pure functions over raw objects, kept apart from the I/O of `kube.publishing`:
whether an object at one of our names is ours (OME's strict ownership), whether another
route already publishes the host on the Gateway, whether an object already holds what
a write would say, and the API server's errors as OME words them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2
from lightkube import ApiError

from ome_routing.core.publication import owned_by
from ome_routing.core.publication_objects import GATEWAY_GROUP
from ome_routing.core.publication_status import Reason

Raw = dict[str, Any]


class PublishError(Exception):
    def __init__(self, reason: Reason, message: str, *, terminal: bool) -> None:
        super().__init__(message)
        self.reason = reason
        self.terminal = terminal


def plural(kind: str) -> str:
    return kind[:-1] + "ies" if kind.endswith("y") else kind + "s"


def not_found(err: Exception) -> bool:
    """A 404: the API server answers an unknown kind with a plain page, not a Status."""
    if isinstance(err, ApiError):
        return err.status.code == 404
    return isinstance(err, httpx2.HTTPStatusError) and err.response.status_code == 404


def as_raw(obj: Any) -> Raw:
    return dict(obj.to_dict()) if hasattr(obj, "to_dict") else dict(obj)


def api_message(err: ApiError) -> str:
    return str(err.status.message or err.status.reason or err.status.code)


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def owned_or_absent(
    kind: str, namespace: str, name: str, read: object, source: tuple[str, str]
) -> None:
    """Check what a read of one of our names gave (the object, None, or its error)."""
    if isinstance(read, ApiError):
        raise PublishError(
            Reason.CLAIM_REJECTED,
            f"read global {kind} {namespace}/{name}: {api_message(read)}",
            terminal=False,
        ) from read
    if isinstance(read, BaseException):
        raise read
    if not isinstance(read, dict):
        return
    if not owned_by(read, *source):
        raise PublishError(
            Reason.CLAIM_REJECTED,
            f"global {kind} {namespace}/{name} belongs to another source",
            terminal=True,
        )
    if (read.get("metadata") or {}).get("deletionTimestamp"):
        raise PublishError(
            Reason.CLAIM_REJECTED,
            f"global {kind} {namespace}/{name} is terminating",
            terminal=False,
        )


def subset(desired: Any, actual: Any) -> bool:
    """Whether `actual` holds everything `desired` says (the server may add defaults)."""
    if isinstance(desired, Mapping):
        if not isinstance(actual, Mapping):
            return False
        return all(subset(v, actual.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(actual) != len(desired):
            return False
        return all(subset(d, a) for d, a in zip(desired, actual, strict=True))
    return bool(desired == actual)


def selected(obj: Raw, namespace: str, selector: Mapping[str, str]) -> bool:
    """Whether a cached object is in `namespace` and carries every label of `selector`."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return bool(
        meta.get("namespace") == namespace and all(labels.get(k) == v for k, v in selector.items())
    )


def zero_weights(route: Raw) -> bool:
    changed = False
    for rule in (route.get("spec") or {}).get("rules") or []:
        for ref in rule.get("backendRefs") or []:
            if ref.get("weight") != 0:
                ref["weight"] = 0
                changed = True
    return changed


def publishes(route: Mapping[str, Any], gateway: tuple[str, str], host: str) -> bool:
    """Whether another route lists exactly `host` and attaches to the same Gateway."""
    spec = route.get("spec") or {}
    if host not in (spec.get("hostnames") or []):
        return False
    route_ns = (route.get("metadata") or {}).get("namespace") or ""
    for parent in spec.get("parentRefs") or []:
        if parent.get("group") not in (None, GATEWAY_GROUP):
            continue
        if parent.get("kind") not in (None, "Gateway"):
            continue
        if (parent.get("namespace") or route_ns, parent.get("name")) == gateway:
            return True
    return False
