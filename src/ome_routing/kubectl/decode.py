"""Go's JSON decoding of the fields `kubectl ome` reads: Go's zero values for absent fields,
`Unreadable` for a field of the wrong type (an int32 out of range, a URL `url.Parse`
refuses, a time that is not RFC 3339, a quantity that is not one)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ome_routing.core import gotime
from ome_routing.core.quantity import Quantity, QuantityError, parse_quantity
from ome_routing.kubectl.gourl import GoURL, URLError, parse_url

_INT32 = 2**31
_INT64 = 2**63


class Unreadable(ValueError):
    """The object does not decode into OME's types."""


def obj(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    raise Unreadable(f"{where}: not an object")


def string(block: Mapping[str, Any], key: str) -> str:
    value = block.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Unreadable(f"{key}: not a string")
    return value


def integer(block: Mapping[str, Any], key: str, bits: int = 32) -> int:
    value = optional_integer(block, key, bits)
    return 0 if value is None else value


def optional_integer(block: Mapping[str, Any], key: str, bits: int = 32) -> int | None:
    value = block.get(key)
    if value is None:
        return None
    limit = _INT32 if bits == 32 else _INT64
    if isinstance(value, bool) or not isinstance(value, int) or not -limit <= value < limit:
        raise Unreadable(f"{key}: not an int{bits}")
    return value


def boolean(block: Mapping[str, Any], key: str) -> bool:
    value = block.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise Unreadable(f"{key}: not a boolean")
    return value


def array(block: Mapping[str, Any], key: str) -> list[Any]:
    value = block.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise Unreadable(f"{key}: not a list")
    return value


def strings(block: Mapping[str, Any], key: str) -> tuple[str, ...]:
    items = array(block, key)
    if not all(isinstance(item, str) for item in items):
        raise Unreadable(f"{key}: not a list of strings")
    return tuple(items)


def string_map(block: Mapping[str, Any], key: str) -> dict[str, str]:
    value = obj(block.get(key), key)
    if not all(isinstance(item, str) for item in value.values()):
        raise Unreadable(f"{key}: not a map of strings")
    return dict(value)


def url(block: Mapping[str, Any], key: str) -> GoURL | None:
    value = block.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Unreadable(f"{key}: not a string")
    try:
        return parse_url(value)
    except URLError as err:
        raise Unreadable(f"{key}: {err}") from None


def time(block: Mapping[str, Any], key: str) -> datetime | None:
    """A `metav1.Time`: None for null or absent (Go's zero time)."""
    value = block.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Unreadable(f"{key}: not a time")
    try:
        moment, zero = gotime.parse(value)
    except ValueError as err:
        raise Unreadable(f"{key}: {err}") from None
    return None if zero else moment


def quantity(block: Mapping[str, Any], key: str) -> Quantity | None:
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise Unreadable(f"{key}: not a quantity")
    try:
        return parse_quantity(str(value))
    except QuantityError as err:
        raise Unreadable(f"{key}: {err}") from None


@dataclass(frozen=True, slots=True)
class Meta:
    name: str
    namespace: str
    uid: str
    generation: int
    resource_version: str
    deleting: bool
    created: datetime | None
    annotations: dict[str, str]
    labels: dict[str, str]
    finalizers: tuple[str, ...]


def read_meta(raw: Mapping[str, Any]) -> Meta:
    meta = obj(raw.get("metadata"), "metadata")
    return Meta(
        name=string(meta, "name"),
        namespace=string(meta, "namespace"),
        uid=string(meta, "uid"),
        generation=integer(meta, "generation", 64),
        resource_version=string(meta, "resourceVersion"),
        deleting=time(meta, "deletionTimestamp") is not None,
        created=time(meta, "creationTimestamp"),
        annotations=string_map(meta, "annotations"),
        labels=string_map(meta, "labels"),
        finalizers=strings(meta, "finalizers"),
    )
