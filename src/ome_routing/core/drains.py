"""Drains: the `ome.io/traffic-drain` annotation that holds clusters at weight 0.

The annotation's value is a JSON object keyed by drain ID, each value naming the
WorkloadCluster it holds and why: `{"maintenance-a":{"cluster":"worker-a","reason":"..."}}`.
An absent or empty annotation means no drains.

The parser is strict: a malformed value must not read as "no drains", or a hand edit
would give a drained cluster its traffic back. The caller keeps the last TrafficMap it
built instead, and logs the error, whose text is the whole log line's tail.

`add_drain` and `remove_drain` produce the annotation's next value for the
`kubectl ome traffic drain/undrain` actions, keeping every other drain.

Errors (all `ValueError`):
- `DrainAnnotationError`: the annotation cannot be read; `str()` is
  `parse ome.io/traffic-drain: <what is wrong>`.
- `DrainArgumentError`: an ID, cluster or reason given to `add_drain` is not acceptable.
- `DrainRefused`: the drain ID already exists (add) or does not exist (remove).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ome_routing.core.quoting import json_kind, quote

ANNOTATION = "ome.io/traffic-drain"
#: Bounds on the annotation, so a hand edit cannot make every reconcile expensive.
MAX_ANNOTATION_BYTES = 32 * 1024
MAX_DRAINS = 64
MAX_REASON_BYTES = 256

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
_DNS1123_SUBDOMAIN_PART = _DNS1123_LABEL
_FIELDS = ("cluster", "reason")

ALREADY_EXISTS = "traffic drain refused: override ID already exists"
DOES_NOT_EXIST = "traffic undrain refused: override ID does not exist"


@dataclass(frozen=True, slots=True)
class Drain:
    """One drain: the WorkloadCluster it holds at weight 0, and the operator's reason."""

    cluster: str
    reason: str


class DrainAnnotationError(ValueError):
    """The annotation's value cannot be read; `detail` is what is wrong with it."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"parse {ANNOTATION}: {detail}")
        self.detail = detail


class DrainArgumentError(ValueError):
    """A drain ID, cluster or reason that a new drain cannot have."""


class DrainRefused(ValueError):
    """The drain ID is already taken (add), or names no drain (remove)."""


Drains = Mapping[str, Drain]
NO_DRAINS: Drains = MappingProxyType({})


def parse_drains(text: str | None) -> Drains:
    """Read the annotation's value; None or `""` is no drains. Raises `DrainAnnotationError`."""
    if text is None or text == "":
        return NO_DRAINS
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_ANNOTATION_BYTES:
        raise DrainAnnotationError(
            f"value is {size} bytes, more than the limit of {MAX_ANNOTATION_BYTES}"
        )
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise DrainAnnotationError(
            f"invalid JSON: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None
    except RecursionError:
        raise DrainAnnotationError("invalid JSON: nested too deeply") from None
    except _Refused as err:
        raise DrainAnnotationError(str(err)) from None
    if not isinstance(document, dict):
        raise DrainAnnotationError(
            f"expected a JSON object keyed by drain ID, got {json_kind(document)}"
        )
    if len(document) > MAX_DRAINS:
        raise DrainAnnotationError(
            f"holds {len(document)} drains, more than the limit of {MAX_DRAINS}"
        )
    drains: dict[str, Drain] = {}
    for drain_id in sorted(document):
        drains[drain_id] = _read_drain(drain_id, document[drain_id])
    return MappingProxyType(drains)


def format_drains(drains: Drains) -> str | None:
    """The annotation's value for these drains, or None (remove it) when there are none.

    Compact JSON with sorted keys, so equal drains always give equal text.
    """
    if not drains:
        return None
    document = {
        drain_id: {"cluster": drains[drain_id].cluster, "reason": drains[drain_id].reason}
        for drain_id in sorted(drains)
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def add_drain(text: str | None, drain_id: str, cluster: str, reason: str) -> str:
    """The annotation's value with one more drain; every other drain is kept.

    Raises `DrainAnnotationError` when the current value is malformed,
    `DrainArgumentError` for a bad ID, cluster or reason, and `DrainRefused`
    when the ID is already taken.
    """
    check_drain_id(drain_id)
    check_cluster(cluster)
    check_reason(reason)
    drains = dict(parse_drains(text))
    if drain_id in drains:
        raise DrainRefused(ALREADY_EXISTS)
    if len(drains) >= MAX_DRAINS:
        raise DrainArgumentError(
            f"{ANNOTATION} already holds {len(drains)} drains, the limit is {MAX_DRAINS}"
        )
    drains[drain_id] = Drain(cluster=cluster, reason=reason)
    value = format_drains(drains)
    assert value is not None
    size = len(value.encode("utf-8"))
    if size > MAX_ANNOTATION_BYTES:
        raise DrainArgumentError(
            f"{ANNOTATION} would be {size} bytes, more than the limit of {MAX_ANNOTATION_BYTES}"
        )
    return value


def remove_drain(text: str | None, drain_id: str) -> tuple[str | None, Drain]:
    """The annotation's value without one drain (None: remove the annotation), and that drain.

    Raises `DrainAnnotationError` when the current value is malformed and
    `DrainRefused` when no drain has the ID.
    """
    drains = dict(parse_drains(text))
    removed = drains.pop(drain_id, None)
    if removed is None:
        raise DrainRefused(DOES_NOT_EXIST)
    return format_drains(drains), removed


def check_drain_id(drain_id: str) -> None:
    """A drain ID is a DNS-1123 label: lowercase letters, digits and hyphens."""
    problem = _drain_id_problem(drain_id)
    if problem:
        raise DrainArgumentError(problem)


def check_cluster(cluster: str) -> None:
    """A drained cluster is named as a WorkloadCluster is: a DNS-1123 subdomain."""
    problem = _cluster_problem(cluster)
    if problem:
        raise DrainArgumentError(problem)


def check_reason(reason: str) -> None:
    """A reason is non-empty, at most 256 bytes, trimmed, on one line, and printable."""
    problem = _reason_problem(reason)
    if problem:
        raise DrainArgumentError(problem)


class _Refused(ValueError):
    """Raised from inside the JSON decoder's hooks."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused(f"duplicate key {quote(key)}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise _Refused(f"invalid JSON: {name} is not a JSON value")


def _read_drain(drain_id: str, value: object) -> Drain:
    where = f"drain {quote(drain_id)}"
    problem = _drain_id_problem(drain_id)
    if problem:
        raise DrainAnnotationError(problem)
    if not isinstance(value, dict):
        raise DrainAnnotationError(
            f'{where}: expected an object with "cluster" and "reason", got {json_kind(value)}'
        )
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise DrainAnnotationError(f"{where}: unknown field {quote(unknown[0])}")
    fields: dict[str, str] = {}
    for field in _FIELDS:
        if field not in value:
            raise DrainAnnotationError(f"{where}: missing {quote(field)}")
        item = value[field]
        if not isinstance(item, str):
            raise DrainAnnotationError(
                f"{where}: {quote(field)} must be a string, got {json_kind(item)}"
            )
        fields[field] = item
    problem = _cluster_problem(fields["cluster"]) or _reason_problem(fields["reason"])
    if problem:
        raise DrainAnnotationError(f"{where}: {problem}")
    return Drain(cluster=fields["cluster"], reason=fields["reason"])


def _drain_id_problem(drain_id: str) -> str | None:
    if _DNS1123_LABEL.fullmatch(drain_id) is None:
        return (
            f"drain ID {quote(drain_id)} must be a DNS-1123 label "
            "(lowercase letters, digits and hyphens, at most 63 characters)"
        )
    return None


def _cluster_problem(cluster: str) -> str | None:
    parts = cluster.split(".")
    if len(cluster) > 253 or not all(_DNS1123_SUBDOMAIN_PART.fullmatch(p) for p in parts):
        return (
            f"cluster {quote(cluster)} must be a DNS-1123 subdomain "
            "(lowercase letters, digits, hyphens and dots, at most 253 characters)"
        )
    return None


def _reason_problem(reason: str) -> str | None:
    shown = json.dumps(reason)  # escaped: a bad reason may hold invisible characters
    if not reason:
        return "reason must not be empty"
    try:
        size = len(reason.encode("utf-8"))
    except UnicodeEncodeError:
        return f"reason {shown} is not valid UTF-8"
    if size > MAX_REASON_BYTES:
        return f"reason is {size} bytes, more than the limit of {MAX_REASON_BYTES}"
    if reason != reason.strip():
        return f"reason {shown} must not start or end with spaces"
    for char in reason:
        if unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"):
            return f"reason {shown} holds a line break, control or invisible character"
    return None
