"""The `Report` format: a reporter's answer, and whether a reading is fresh.

A report is a JSON object `{"servable": 4, "observedAt": "2026-09-28T10:00:00Z"}`:
`servable` a whole number, 0 or more, that fits an int64; `observedAt` RFC 3339 with a
time zone (`Z` or `+hh:mm`, fractional seconds allowed, kept to the microsecond).
Other fields are ignored. Every failure carries the exact `fallbackReason` text that
the TrafficMap shows; values quoted in it use Go's double quotes, and are cut short
so that a hostile body cannot blow up a status field.

Errors: `ReportError` (its `reason` is the fallback reason) from `parse_report`;
`freshness_failure` returns a reason instead of raising, since it judges a valid
reading against the clock.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

from ome_routing.core.durations import Duration
from ome_routing.core.quoting import json_kind

FORMAT_REPORT = "Report"
#: Formats this build can read; `spec.routing.capacity.format` must name one.
REGISTERED_FORMATS: tuple[str, ...] = (FORMAT_REPORT,)

INVALID_PREFIX = "capacity response is not a valid report: "
NO_SERVABLE = "capacity report has no servable count"
NO_OBSERVED_AT = "capacity report has no observedAt stamp"
FUTURE = "capacity report timestamp is in the future"
_MAX_SERVABLE = (1 << 63) - 1  # servable is an int64 in OME's API
_MAX_INT_DIGITS = 20  # longer integer text cannot fit an int64; never hand it to int()
_MAX_SHOWN = 64  # longest value text quoted in a reason

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)


_JSON_SPACE = rb"[ \t\n\r]*"
#: The usual report, `servable` first, nothing else, no escapes: read without the JSON
#: decoder, its stamp by `datetime.fromisoformat` (which this shape keeps to what RFC 3339
#: allows: an offset of at most 23:59). A body of any other shape takes the general path;
#: so does one that matches but holds an impossible time, so that every reason comes
#: from one place.
_PLAIN_REPORT = re.compile(
    _JSON_SPACE
    + rb"\{"
    + _JSON_SPACE
    + rb'"servable"'
    + _JSON_SPACE
    + rb":"
    + _JSON_SPACE
    + rb"(0|[1-9][0-9]{0,17})"  # at most 18 digits: always within an int64
    + _JSON_SPACE
    + rb","
    + _JSON_SPACE
    + rb'"observedAt"'
    + _JSON_SPACE
    + rb":"
    + _JSON_SPACE
    + rb'"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?'
    + rb'(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"'
    + _JSON_SPACE
    + rb"\}"
    + _JSON_SPACE
)


def negative_reason(servable: int) -> str:
    return f"capacity report is negative ({servable})"


def stale_reason(max_age: Duration) -> str:
    return f"capacity report is stale (at least configured maximum age {max_age})"


class ReportError(ValueError):
    """A response body that is not a usable report; `reason` is the fallback reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Reading:
    """One accepted report: how many replicas can serve, and when that was worked out."""

    servable: int
    observed_at: datetime

    def age(self, now: datetime) -> timedelta:
        return now - self.observed_at


@dataclass(frozen=True, slots=True)
class _Number:
    """A JSON number that is not a small integer, kept as its text (no float rounding)."""

    text: str


class _NotJson(ValueError):
    """A token that Python's json module accepts and JSON does not (NaN, Infinity)."""


def _reject_constant(token: str) -> object:
    raise _NotJson(token)


def _read_int(text: str) -> int | _Number:
    return int(text) if len(text) <= _MAX_INT_DIGITS else _Number(text)


def _invalid(detail: str) -> ReportError:
    return ReportError(INVALID_PREFIX + detail)


def _json_kind(value: object) -> str:
    return "number" if isinstance(value, _Number) else json_kind(value)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."


def _quote(text: str) -> str:
    """A string value as a reason shows it: JSON (Go) double quotes, cut short."""
    return json.dumps(_clip(text))


def _show(value: object) -> str:
    """A JSON value as a reason shows it: scalars by value, arrays and objects by kind."""
    if isinstance(value, _Number):
        return _clip(value.text)
    if isinstance(value, str):
        return _quote(value)
    if value is None or isinstance(value, (bool, int)):
        return json.dumps(value)
    return _json_kind(value)


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp that carries a time zone (`Z` or `+hh:mm`).

    Digits beyond the microsecond are dropped (Python's `datetime` holds no more).
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"{_quote(text)} is not an RFC 3339 time with a time zone")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    micro = int((match.group(7) or "").ljust(6, "0")[:6])
    if match.group(8):
        tz = UTC
    else:
        offset_hours, offset_minutes = int(match.group(10)), int(match.group(11))
        if offset_hours > 23 or offset_minutes > 59:
            raise ValueError(f"{_quote(text)} has a time zone offset out of range")
        offset = timedelta(hours=offset_hours, minutes=offset_minutes)
        tz = timezone(-offset if match.group(9) == "-" else offset)
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError as err:
        raise ValueError(f"{_quote(text)} is not a valid time: {err}") from None


def format_rfc3339(moment: datetime) -> str:
    """Print a time as RFC 3339 in UTC, `Z`-suffixed, with fractions only when present."""
    moment = moment.astimezone(UTC)
    out = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if moment.microsecond:
        out += f".{moment.microsecond:06d}".rstrip("0")
    return out + "Z"


def _load(text: str) -> object:
    try:
        return json.loads(
            text, parse_int=_read_int, parse_float=_Number, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as err:
        raise _invalid(f"{err.msg} at line {err.lineno} column {err.colno}") from None
    except _NotJson as err:
        raise _invalid(f"{err} is not a JSON value") from None
    except RecursionError:
        raise _invalid("JSON nested too deeply") from None


def _plain_report(body: bytes) -> Reading | None:
    """The reading of a body in the usual shape, or None to take the general path."""
    match = _PLAIN_REPORT.fullmatch(body)
    if match is None:
        return None
    servable, stamp = match.groups()
    try:
        # digits past the microsecond are dropped, as the general path drops them
        observed_at = datetime.fromisoformat(stamp.decode("ascii"))
    except ValueError:
        return None
    return Reading(int(servable), observed_at)


def parse_report(body: bytes) -> Reading:
    """Read a `Report` body, or raise `ReportError` with the exact fallback reason.

    A field that is absent or null counts as missing; so does an empty `observedAt`.
    """
    plain = _plain_report(body)
    if plain is not None:
        return plain
    if not body.strip():
        raise _invalid("empty body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid("body is not UTF-8 text") from None
    document = _load(text)
    if not isinstance(document, dict):
        raise _invalid(f"expected a JSON object, got {_json_kind(document)}")
    servable = document.get("servable")
    observed = document.get("observedAt")
    if servable is None:
        raise ReportError(NO_SERVABLE)
    if observed is None or observed == "":
        raise ReportError(NO_OBSERVED_AT)
    if isinstance(servable, bool) or not isinstance(servable, (int, _Number)):
        raise _invalid(f"servable must be a whole number, got {_show(servable)}")
    if isinstance(servable, _Number):
        if any(mark in servable.text for mark in ".eE"):
            raise _invalid(f"servable must be a whole number, got {_show(servable)}")
        raise _invalid(f"servable {_show(servable)} is out of range")
    if not isinstance(observed, str):
        raise _invalid(f"observedAt must be an RFC 3339 string, got {_json_kind(observed)}")
    try:
        observed_at = parse_rfc3339(observed)
    except ValueError as err:
        raise _invalid(f"observedAt {err}") from None
    if servable > _MAX_SERVABLE or servable < -_MAX_SERVABLE - 1:
        raise _invalid(f"servable {servable} is out of range")
    if servable < 0:
        raise ReportError(negative_reason(servable))
    return Reading(servable=servable, observed_at=observed_at)


def freshness_failure(reading: Reading, now: datetime, max_age: Duration) -> str | None:
    """The fallback reason when a reading no longer counts at `now`, else None.

    A reading from the future fails; one whose age has reached `max_age` is stale
    (compared exactly, although `max_age` may hold nanoseconds that a `datetime` cannot).
    """
    age = reading.age(now)
    if age < timedelta(0):
        return FUTURE
    if age >= max_age.ceil_timedelta():
        return stale_reason(max_age)
    return None
