"""Drains: the `ome.io/traffic-drain` annotation that holds clusters at weight 0.

The annotation's value is a JSON object keyed by override ID, each value naming the
WorkloadCluster it holds and why: `{"maintenance-a":{"cluster":"worker-a","reason":"..."}}`.
An absent annotation means no drains.

`parse_drains` reads the value as OME does: a present value is always parsed strictly,
an empty one included, so that a malformed value can never read as "no drains" and give
a drained cluster its traffic back; the caller keeps the last TrafficMap instead, and
logs the error. Nothing else is judged: any non-empty, trimmed ID, cluster and reason
is accepted, with no name rule and no length or count limit (OME's controller has none).

`add_drain` and `remove_drain` produce the annotation's next value for the
`kubectl ome traffic drain/undrain` actions, keeping every other drain, written as OME's
plugin writes it (`format_drains`: Go's `json.Marshal`, sorted by ID). The CLI is
stricter than the controller, as OME's is: a new drain's ID must be a DNS-1123 label,
its cluster a DNS-1123 subdomain, and its reason bounded, trimmed and without line
breaks, control or invisible characters; the plugin checks OME's rules
(`kubectl.drain_checks`) first, which these never refuse.

Errors (all `ValueError`):
- `DrainAnnotationError`: the annotation cannot be read; `str()` is
  `parse ome.io/traffic-drain: <what is wrong>`, in OME's words.
- `DrainArgumentError`: an ID, cluster or reason given to `add_drain` is not acceptable;
  its subclass `DrainLimitError`: the new drain would pass `MAX_DRAINS` or
  `MAX_ANNOTATION_BYTES`.
- `DrainRefused`: the drain ID already exists (add) or does not exist (remove).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ome_routing.core.gojson import Delim, GoJSONError, TokenStream, format_token
from ome_routing.core.gojson.encoding import marshal
from ome_routing.core.names import dns1123_label_problems, dns1123_subdomain_problems
from ome_routing.core.quoting import quote

ANNOTATION = "ome.io/traffic-drain"
#: Bounds that `kubectl ome traffic` keeps to; the controller reads any size.
MAX_ANNOTATION_BYTES = 32 * 1024
MAX_DRAINS = 64
MAX_REASON_BYTES = 256

#: What Go's `strings.TrimSpace` trims (Unicode White_Space), unlike `str.strip()`,
#: which also trims the ASCII separators U+001C..U+001F.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)

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


class DrainLimitError(DrainArgumentError):
    """One more drain would pass the plugin's bounds (count or bytes)."""


class DrainRefused(ValueError):
    """The drain ID is already taken (add), or names no drain (remove)."""


Drains = Mapping[str, Drain]
NO_DRAINS: Drains = MappingProxyType({})


def parse_drains(text: str | None) -> Drains:
    """Read the annotation's value (None: absent, no drains), sorted by ID.

    Raises `DrainAnnotationError` with OME's message for every malformed value.
    """
    if text is None:
        return NO_DRAINS
    tokens = TokenStream(text)
    start = _token(tokens, "decode top-level object")
    if start != Delim("{"):
        raise DrainAnnotationError("top-level value must be a JSON object keyed by override ID")
    drains: dict[str, Drain] = {}
    while tokens.more():
        drain_id = _token(tokens, "decode override ID")
        if not isinstance(drain_id, str):
            raise DrainAnnotationError("override ID must be a JSON object key")
        _check_text("override ID", drain_id)
        if drain_id in drains:
            raise DrainAnnotationError(f"duplicate override ID {quote(drain_id)}")
        drains[drain_id] = _read_drain(tokens, drain_id)
    if _token(tokens, "close top-level object") != Delim("}"):
        raise DrainAnnotationError("top-level value must end with a JSON object")
    try:
        trailing = tokens.token()
    except GoJSONError as err:
        if not err.eof:
            raise DrainAnnotationError(f"decode trailing data: {err}") from None
    else:
        raise DrainAnnotationError(f"unexpected trailing JSON token {format_token(trailing)}")
    return MappingProxyType({drain_id: drains[drain_id] for drain_id in sorted(drains)})


def format_drains(drains: Drains) -> str | None:
    """The annotation's value for these drains, or None (remove it) when there are none.

    Compact JSON with sorted keys as Go's `json.Marshal` writes it (`<`, `>` and `&`
    escaped), so equal drains always give equal text.
    """
    if not drains:
        return None
    document = {
        drain_id: {"cluster": drains[drain_id].cluster, "reason": drains[drain_id].reason}
        for drain_id in sorted(drains)
    }
    return marshal(document)


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
        raise DrainLimitError(
            f"{ANNOTATION} already holds {len(drains)} drains, the limit is {MAX_DRAINS}"
        )
    drains[drain_id] = Drain(cluster=cluster, reason=reason)
    value = format_drains(drains)
    assert value is not None
    size = len(value.encode("utf-8"))
    if size > MAX_ANNOTATION_BYTES:
        raise DrainLimitError(
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
    """A reason is non-empty, at most 256 bytes, trimmed, on one line, with no control or
    invisible character (OME's rule, less its credential shapes)."""
    problem = _reason_problem(reason)
    if problem:
        raise DrainArgumentError(problem)


def _token(tokens: TokenStream, what: str) -> object:
    try:
        return tokens.token()
    except GoJSONError as err:
        raise DrainAnnotationError(f"{what}: {err}") from None


def _check_text(field: str, value: str) -> None:
    trimmed = value.strip(_GO_SPACE)
    if not trimmed:
        raise DrainAnnotationError(f"{field} must be non-empty")
    if value != trimmed:
        raise DrainAnnotationError(f"{field} must not have leading or trailing whitespace")


def _read_drain(tokens: TokenStream, drain_id: str) -> Drain:
    where = f"override {quote(drain_id)}"
    if _token(tokens, f"{where}: decode object") != Delim("{"):
        raise DrainAnnotationError(f"{where} must be a JSON object")
    fields = {"cluster": "", "reason": ""}
    seen: set[str] = set()
    while tokens.more():
        name = _token(tokens, f"{where}: decode field")
        if not isinstance(name, str):
            raise DrainAnnotationError(f"{where} field name must be a string")
        if name in seen:
            raise DrainAnnotationError(f"{where} has duplicate field {quote(name)}")
        seen.add(name)
        try:
            value = tokens.string_value()
        except GoJSONError as err:
            raise DrainAnnotationError(
                f"{where} field {quote(name)} must be a string: {err}"
            ) from None
        if name not in fields:
            raise DrainAnnotationError(f"{where} has unknown field {quote(name)}")
        fields[name] = value
    if _token(tokens, f"{where}: close object") != Delim("}"):
        raise DrainAnnotationError(f"{where} must end with a JSON object")
    _check_text(f"{where} cluster", fields["cluster"])
    _check_text(f"{where} reason", fields["reason"])
    return Drain(cluster=fields["cluster"], reason=fields["reason"])


def _drain_id_problem(drain_id: str) -> str | None:
    if dns1123_label_problems(drain_id):
        return (
            f"drain ID {quote(drain_id)} must be a DNS-1123 label "
            "(lowercase letters, digits and hyphens, at most 63 characters)"
        )
    return None


def _cluster_problem(cluster: str) -> str | None:
    if dns1123_subdomain_problems(cluster):
        return (
            f"cluster {quote(cluster)} must be a DNS-1123 subdomain "
            "(lowercase letters, digits, hyphens and dots, at most 253 characters)"
        )
    return None


def _reason_problem(reason: str) -> str | None:
    shown = quote(reason)  # escaped: a bad reason may hold invisible characters
    if not reason:
        return "reason must not be empty"
    try:
        size = len(reason.encode("utf-8"))
    except UnicodeEncodeError:
        return f"reason {shown} is not valid UTF-8"
    if size > MAX_REASON_BYTES:
        return f"reason is {size} bytes, more than the limit of {MAX_REASON_BYTES}"
    if reason != reason.strip(_GO_SPACE):
        return f"reason {shown} must not start or end with spaces"
    for char in reason:
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            return f"reason {shown} holds a line break, control or invisible character"
    return None
