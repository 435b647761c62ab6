"""Kubernetes name rules the publisher needs, with the API machinery's own messages.

OME quotes Kubernetes' validation texts (`k8s.io/apimachinery/pkg/util/validation`)
in its plan errors (`TrafficMap entry cluster "X" is invalid: <problems>`), so the
checks here return the same problem lines, joined with "; " by the caller. Lengths are
Go's `len`, bytes of UTF-8, not characters (`go_len`).
"""

from __future__ import annotations

import ipaddress
import re

__all__ = [
    "dns1035_label_problems",
    "dns1123_label_problems",
    "dns1123_subdomain_problems",
    "go_len",
    "is_ip",
    "label_value_problems",
    "port_problems",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1123_SUBDOMAIN = re.compile(_LABEL + r"(\." + _LABEL + r")*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

_SUBDOMAIN_FORMAT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_FORMAT = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS1035_FORMAT = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
_LABEL_VALUE_FORMAT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def go_len(text: str) -> int:
    """Go's `len` of a string: its UTF-8 bytes (`é` is 2), as OME's limits count."""
    return len(text.encode("utf-8", "surrogatepass"))


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def dns1123_subdomain_problems(value: str) -> list[str]:
    problems = [_too_long(253)] if go_len(value) > 253 else []
    if _DNS1123_SUBDOMAIN.fullmatch(value) is None:
        problems.append(_SUBDOMAIN_FORMAT)
    return problems


def dns1123_label_problems(value: str) -> list[str]:
    problems = [_too_long(63)] if go_len(value) > 63 else []
    if _DNS1123_LABEL.fullmatch(value) is None:
        problems.append(_LABEL_FORMAT)
    return problems


def dns1035_label_problems(value: str) -> list[str]:
    problems = [_too_long(63)] if go_len(value) > 63 else []
    if _DNS1035_LABEL.fullmatch(value) is None:
        problems.append(_DNS1035_FORMAT)
    return problems


def label_value_problems(value: str) -> list[str]:
    problems = [_too_long(63)] if go_len(value) > 63 else []
    if _LABEL_VALUE.fullmatch(value) is None:
        problems.append(_LABEL_VALUE_FORMAT)
    return problems


def port_problems(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else ["must be between 1 and 65535, inclusive"]


def is_ip(host: str) -> bool:
    """Go's `net.ParseIP` accepts a bare IPv4 or IPv6 address (no zone, no brackets)."""
    if "%" in host:
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
