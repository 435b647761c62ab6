"""Checks of the values `traffic status` reads: condition combinations, canary records,
revision names and service addresses, as OME's CLI checks them."""

from __future__ import annotations

import re
from typing import Any

from ome_routing.core.names import dns1123_subdomain_problems, is_ip
from ome_routing.kubectl.gourl import GoURL

__all__ = [
    "COMPONENTS",
    "canary_primary",
    "proves_no_unsupported",
    "revision_hash",
    "sanitize_endpoint",
    "valid_canary",
    "valid_combination",
]

Value = dict[str, Any]
COMPONENTS = ("engine", "decoder", "router")
_HASH = re.compile(r"[0-9a-f]{8}")
_UNSUPPORTED = "BackendPolicyUnsupportedFields"
_PATH_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~$&+,/:;=@"
)


def proves_no_unsupported(ready: Value | None) -> bool:
    if ready is None or ready["source"]["freshness"] != "Current":
        return False
    return (ready["status"], ready["reason"]) in (
        ("True", "AcceptedByGateway"),
        ("Unknown", "Pending"),
        ("False", "GatewayRejected"),
    )


def valid_combination(kind: str, status: str, reason: str) -> bool:
    if kind == _UNSUPPORTED:
        return status == "True" and reason == "UnsupportedField"
    if status == "True":
        return reason == "AcceptedByGateway"
    if status == "Unknown":
        return reason == "Pending"
    if status == "False":
        return reason in (
            "ConflictingPolicy",
            "NoTranslatorAvailable",
            "GatewayRejected",
            "TranslationFailed",
        )
    return False


def canary_primary(group: Value | None) -> str | None:
    if group is None:
        return None
    seen: set[str] = set()
    for component in group["components"]:
        if component in seen or component not in COMPONENTS:
            return None
        seen.add(component)
    for component in ("router", "engine", "decoder"):
        if component in seen:
            return component
    return None


def valid_canary(status: Value, steps: int) -> bool:
    step, weight = status["currentStep"], status["observedTrafficWeight"]
    if step < 0 or not 0 <= weight <= 100 or not _HASH.fullmatch(status["canaryRevisionHash"]):
        return False
    if step == steps:
        return bool(weight == 100 and status["stableRevisionHash"] == "")
    stable = status["stableRevisionHash"]
    return (
        step < steps
        and _HASH.fullmatch(stable) is not None
        and stable != status["canaryRevisionHash"]
    )


def revision_hash(isvc: str, component: str, name: str) -> str | None:
    """The revision hash a per-revision Service name ends in, when the name is OME's."""
    if len(name) < 8 or not _HASH.fullmatch(name[-8:]):
        return None
    hash_ = name[-8:]
    expected = f"{isvc}-{component}-rev-{hash_}"
    # Names over 63 characters are shortened by OME with a hash; such names are not
    # reproduced here, so only the unshortened form is recognized.
    return hash_ if len(expected) <= 63 and name == expected else None


def sanitize_endpoint(url: GoURL | None) -> str | None:
    """`scheme://host[:port]/path` of a service address, or None when it is not a safe one."""
    if url is None or url == GoURL():
        return None
    if (
        url.scheme not in ("http", "https")
        or not url.host
        or url.username is not None
        or url.opaque
        or url.raw_query
        or url.force_query
        or url.fragment
        or url.raw_fragment
        or url.raw_path
    ):
        return None
    path = url.path
    if len(path.encode("utf-8", "surrogateescape")) > 256 or (path and not path.startswith("/")):
        return None
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in path):
        return None
    hostname = url.hostname().lower()
    if not hostname or (not is_ip(hostname) and dns1123_subdomain_problems(hostname)):
        return None
    port = url.port()
    if port and not 1 <= int(port or "0") <= 65535:
        return None
    escaped = "".join(
        ch
        if ch in _PATH_SAFE
        else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape"))
        for ch in path
    )
    sanitized = f"{url.scheme}://{url.host.lower()}{escaped}"
    return sanitized if len(sanitized.encode("utf-8")) <= 512 else None
