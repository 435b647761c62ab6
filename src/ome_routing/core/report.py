"""The `Report` format: a reporter's answer, and whether a reading is fresh.

A report is a JSON object `{"servable": 4, "observedAt": "2026-09-28T10:00:00Z"}`:
`servable` a whole number, 0 or more; `observedAt` RFC 3339 with a time zone.
Every failure carries the exact `fallbackReason` text that the TrafficMap shows.

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

FORMAT_REPORT = "Report"
#: Formats this build can read; `spec.routing.capacity.format` must name one.
REGISTERED_FORMATS: tuple[str, ...] = (FORMAT_REPORT,)

INVALID_PREFIX = "capacity response is not a valid report: "
NO_SERVABLE = "capacity report has no servable count"
NO_OBSERVED_AT = "capacity report has no observedAt stamp"
FUTURE = "capacity report timestamp is in the future"
_MAX_SERVABLE = (1 << 63) - 1

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
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


def _invalid(detail: str) -> ReportError:
    return ReportError(INVALID_PREFIX + detail)


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp that carries a time zone (`Z` or `+hh:mm`)."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 time with a time zone")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    micro = int((match.group(7) or "").ljust(6, "0")[:6])
    if match.group(8):
        tz = UTC
    else:
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        tz = timezone(-offset if match.group(9) == "-" else offset)
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)
    except ValueError as err:
        raise ValueError(f"{text!r} is not a valid time: {err}") from None


def format_rfc3339(moment: datetime) -> str:
    """Print a time as RFC 3339 in UTC, `Z`-suffixed, with fractions only when present."""
    moment = moment.astimezone(UTC)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0") + "Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_report(body: bytes) -> Reading:
    """Read a `Report` body, or raise `ReportError` with the exact fallback reason."""
    if not body.strip():
        raise _invalid("empty body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid("body is not UTF-8 text") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise _invalid(f"{err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise _invalid("JSON nested too deeply") from None
    if not isinstance(document, dict):
        raise _invalid(f"expected a JSON object, got {_json_kind(document)}")
    servable = document.get("servable")
    observed = document.get("observedAt")
    if servable is None:
        raise ReportError(NO_SERVABLE)
    if observed is None or observed == "":
        raise ReportError(NO_OBSERVED_AT)
    if isinstance(servable, bool) or not isinstance(servable, int):
        shown = json.dumps(servable)
        raise _invalid(f"servable must be a whole number, got {shown}")
    if not isinstance(observed, str):
        raise _invalid(f"observedAt must be an RFC 3339 string, got {_json_kind(observed)}")
    try:
        observed_at = parse_rfc3339(observed)
    except ValueError as err:
        raise _invalid(f"observedAt {err}") from None
    if servable < 0:
        raise ReportError(negative_reason(servable))
    if servable > _MAX_SERVABLE:
        raise _invalid(f"servable {servable} is out of range")
    return Reading(servable=servable, observed_at=observed_at)


def freshness_failure(reading: Reading, now: datetime, max_age: Duration) -> str | None:
    """The fallback reason when a reading no longer counts at `now`, else None.

    A reading from the future fails; one whose age has reached `max_age` is stale.
    """
    age = reading.age(now)
    if age < timedelta(0):
        return FUTURE
    if age >= max_age.as_timedelta():
        return stale_reason(max_age)
    return None
