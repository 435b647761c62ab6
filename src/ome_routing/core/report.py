"""The `Report` format: a reporter's answer, and whether a reading is fresh.

A report is a JSON object `{"servable": 4, "observedAt": "2026-09-28T10:00:00Z"}`,
decoded as OME decodes it with Go's `encoding/json` into a struct with an `int32`
`servable` and a `time.Time` `observedAt`:

- the whole body must be JSON (a syntax error anywhere comes first);
- keys match the field names exactly, else case-insensitively (`Servable`); unknown
  keys are ignored; a repeated key is decoded again, the last one wins;
- a `servable` that is not an integer literal that fits an int32 (`4.0`, `3000000000`,
  `"4"`) is a type error; Go keeps the first type error and goes on decoding;
- `observedAt` is read from its raw text by Go's strict RFC 3339 reader (`core.gotime`):
  an empty string or a lowercase `t`/`z` fails at once, ahead of any type error;
  `null` leaves it unset;
- then, in order: no `servable` (absent or `null`), no `observedAt` (absent, `null`, or
  Go's zero time), a negative count.

Each failure carries the exact `fallbackReason` text that the TrafficMap shows: Go's
error text after the `capacity response is not a valid report: ` prefix (`core.gojson`),
cut short so that a hostile body cannot blow up a status field.
The usual shape is read by a fast path that gives the same result as the general one.

Errors: `ReportError` (its `reason` is the fallback reason) from `parse_report`;
`freshness_failure` returns a reason instead of raising, since it judges a valid
reading against the clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ome_routing.core import gojson, gotime
from ome_routing.core.durations import Duration

FORMAT_REPORT = "Report"
#: Formats this build can read; `spec.routing.capacity.format` must name one.
REGISTERED_FORMATS: tuple[str, ...] = (FORMAT_REPORT,)

INVALID_PREFIX = "capacity response is not a valid report: "
NO_SERVABLE = "capacity report has no servable count"
NO_OBSERVED_AT = "capacity report has no observedAt stamp"
FUTURE = "capacity report timestamp is in the future"
_INT32 = range(-(1 << 31), 1 << 31)  # servable is an int32 in OME's report struct
_MAX_SHOWN = 64  # longest value text quoted in a type error
_MAX_DETAIL = 256  # longest detail after the prefix (a stamp's error quotes it twice)
#: Go's names in its type errors: OME's report struct and its fields
_STRUCT = "routing.CapacityReport"
_FIELD_TYPE = {"servable": "int32"}
_SERVABLE, _OBSERVED_AT = "servable", "observedAt"
_FOLDED = {gojson.fold(_SERVABLE): _SERVABLE, gojson.fold(_OBSERVED_AT): _OBSERVED_AT}
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")

_JSON_SPACE = rb"[ \t\n\r]*"
#: The usual report, `servable` first, nothing else, no escapes: read without the JSON
#: decoder, its stamp by `datetime.fromisoformat` (which this shape keeps to what Go's
#: RFC 3339 reader allows: `T` and `Z` in upper case, an offset of at most 23:59, a year
#: from 0100, so never Go's zero time). A body of any other shape takes the general
#: path; so does one that matches but holds an impossible time, so that every reason
#: comes from one place.
_PLAIN_REPORT = re.compile(
    _JSON_SPACE
    + rb"\{"
    + _JSON_SPACE
    + rb'"servable"'
    + _JSON_SPACE
    + rb":"
    + _JSON_SPACE
    + rb"(0|[1-9][0-9]{0,8})"  # at most 9 digits: always within an int32
    + _JSON_SPACE
    + rb","
    + _JSON_SPACE
    + rb'"observedAt"'
    + _JSON_SPACE
    + rb":"
    + _JSON_SPACE
    + rb'"((?!00)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?'
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


def _clip(text: str, limit: int = _MAX_SHOWN) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _invalid(detail: str) -> ReportError:
    return ReportError(INVALID_PREFIX + _clip(detail, _MAX_DETAIL))


def _type_error(kind: str, field: str | None) -> ReportError:
    """Go's `UnmarshalTypeError` text; `kind` carries a number's literal, cut short."""
    if field is None:
        return ReportError(
            f"{INVALID_PREFIX}json: cannot unmarshal {kind} into Go value of type {_STRUCT}"
        )
    return ReportError(
        f"{INVALID_PREFIX}json: cannot unmarshal {kind} into Go struct field "
        f"{_STRUCT.split('.')[-1]}.{field} of type {_FIELD_TYPE[field]}"
    )


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with a time zone as Go's strict reader does.

    Digits beyond the microsecond are dropped (Python's `datetime` holds no more).
    Raises `ValueError` with Go's error text.
    """
    return gotime.parse(text)[0]


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


def _int32(raw: str, value: object) -> int | ReportError | None:
    """`servable` as Go stores it in an `*int32`: None for null, or the type error."""
    if value is None:
        return None
    if not isinstance(value, gojson.Number):
        return _type_error(gojson.kind(value), _SERVABLE)
    if _INTEGER.fullmatch(raw) and len(raw) <= 12 and int(raw) in _INT32:
        return int(raw)
    return _type_error(f"number {_clip(raw)}", _SERVABLE)


def parse_report(body: bytes) -> Reading:
    """Read a `Report` body, or raise `ReportError` with the exact fallback reason."""
    plain = _plain_report(body)
    if plain is not None:
        return plain
    try:
        text, document = gojson.decode(body)
    except gojson.GoJSONError as err:
        raise _invalid(str(err)) from None
    servable: int | None = None
    observed: tuple[datetime, bool] | None = None
    if isinstance(document, dict):
        first_error: ReportError | None = None
        for key, raw, value in gojson.members(text):
            field = key if key in (_SERVABLE, _OBSERVED_AT) else _FOLDED.get(gojson.fold(key))
            if field == _SERVABLE:
                read = _int32(raw, value)
                if isinstance(read, ReportError):
                    first_error = first_error or read  # Go keeps the first, and goes on
                else:
                    servable = read
            elif field == _OBSERVED_AT and value is not None:
                # Go hands time.Time the raw text, escapes and all; its error ends decoding
                if not isinstance(value, str) or isinstance(value, gojson.Number):
                    raise _invalid("Time.UnmarshalJSON: input is not a JSON string")
                try:
                    observed = gotime.parse(raw[1:-1])
                except ValueError as err:
                    raise _invalid(str(err)) from None
        if first_error is not None:
            raise first_error
    elif document is not None:  # Go decodes null into a struct as nothing at all
        raise _type_error(gojson.kind(document), None)
    if servable is None:
        raise ReportError(NO_SERVABLE)
    if observed is None or observed[1]:
        raise ReportError(NO_OBSERVED_AT)
    if servable < 0:
        raise ReportError(negative_reason(servable))
    return Reading(servable=servable, observed_at=observed[0])


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
