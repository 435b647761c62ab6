"""Errors of `kubectl ome get` reads, as OME words them (`get trafficmaps prod/chat: NotFound`).

The API server's own message is never shown: only what was read (operation, resource,
namespace, name: dropped when the line would pass 80 columns) and a fixed class of
the failure. A 404 that names no object means the API itself is missing:
`OMEAPIMissing (install OME first)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ome_routing.core.names import dns1123_label_problems, dns1123_subdomain_problems
from ome_routing.kubectl.gotext import sanitize

__all__ = ["classify", "read_error"]

_BY_CODE = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "UnsupportedAPI",
    406: "UnsupportedAPI",
    409: "Conflict",
    400: "Invalid",
    410: "Expired",
    413: "ResponseTooLarge",
    415: "UnsupportedAPI",
    422: "Invalid",
    429: "TooManyRequests",
    500: "ServerError",
    503: "ServiceUnavailable",
    504: "TimedOut",
}


def classify(reason: str, code: int, status: Mapping[str, Any]) -> tuple[str, str]:
    """(the class of a failed read, a hint or "") from the request's failure."""
    if reason == "Timeout":
        return "TimedOut", ""
    if reason == "Cancelled":
        return "Canceled", ""
    if code == 404:
        details = status.get("details")
        if not isinstance(details, Mapping) or not details.get("name"):
            return "OMEAPIMissing", "install OME first"
    if code == 500 and status.get("reason") == "ServerTimeout":
        return "TimedOut", ""
    if reason == "ResponseTooLarge":
        return "ResponseTooLarge", ""
    return _BY_CODE.get(code, "Unavailable"), ""


def _safe_label(value: str) -> bool:
    return value != "" and not dns1123_label_problems(value) and sanitize(value, 63) == value


def _safe_subdomain(value: str) -> bool:
    return value != "" and not dns1123_subdomain_problems(value) and sanitize(value, 253) == value


def _target(operation: str, resource: str, namespace: str, name: str, width: int) -> str:
    base = f"{operation} {resource}"
    if not _safe_subdomain(resource) or len(base) > width:
        return f"{operation} OME resource"
    if name:
        if not _safe_subdomain(name):
            return base
        if namespace == "":
            full = f"{base} {name}"
        elif not _safe_label(namespace):
            return base
        else:
            full = f"{base} {namespace}/{name}"
        return full if len(full) <= width else base
    if namespace:
        if not _safe_label(namespace):
            return base
        full = f"{base} {namespace}"
        return full if len(full) <= width else base
    return base


def read_error(
    operation: str, resource: str, namespace: str, name: str, failure: tuple[str, str]
) -> str:
    """`<operation> <resource> [<namespace>/]<name>: <class>[ (<hint>)]`."""
    reason, hint = failure
    width = 80 - len("error: ") - len(": ") - len(reason)
    if hint:
        width -= len(" (") + len(hint) + len(")")
    target = _target(operation, resource, namespace, name, width)
    return f"{target}: {reason} ({hint})" if hint else f"{target}: {reason}"
