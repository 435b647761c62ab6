"""RFC 3339 timestamps read as Go's `time.Time.UnmarshalJSON` reads them.

OME's reports carry `observedAt` as a Go `time.Time`: Go's strict RFC 3339 reading
accepts `2026-09-28T10:00:00Z`, `...00.5+02:00`, and refuses a lowercase `t` or `z`, an
empty string, a single-digit hour, a comma before the fraction, and offsets of 24 hours
or 60 minutes. Its error texts (`parsing time "" as "2006-01-02T15:04:05Z07:00": cannot
parse "" as "2006"`) follow the report reason's prefix, so this module reproduces
them: Go first tries its fast RFC 3339 reader, then `time.Parse` with the RFC 3339
layout, whose first failing element names the error, then rejects what `Parse`
accepts and RFC 3339 does not.

`datetime` cannot hold an instant before year 1 (Go can): such a stamp reads as the
earliest `datetime`, stale against any `maxAge`. `parse` says apart Go's zero time
(`0001-01-01T00:00:00Z`, a report without a stamp) from the rest.

Errors: `ValueError` whose text is Go's error text.
"""

from __future__ import annotations

import re
from calendar import isleap
from datetime import UTC, datetime, timedelta, timezone

from ome_routing.core.durations import go_quote

LAYOUT = "2006-01-02T15:04:05Z07:00"
_FAST = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))"
)
#: The RFC 3339 layout as `time.Parse` walks it: (literal before, element).
_CHUNKS = (
    ("", "2006"),
    ("-", "01"),
    ("-", "02"),
    ("T", "15"),
    (":", "04"),
    (":", "05"),
    ("", "Z07:00"),
)
#: The layout's numbers that `time.Parse` checks as it reads them: (low, high, name).
_RANGES = {
    "01": (1, 12, "month"),
    "15": (0, 23, "hour"),
    "04": (0, 59, "minute"),
    "05": (0, 59, "second"),
}
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def _days_in(month: int, year: int) -> int:
    return 29 if month == 2 and isleap(year) else _DAYS[month - 1]


def _cannot_parse(value: str, elem: str, layout_elem: str) -> ValueError:
    return ValueError(
        f"parsing time {go_quote(value)} as {go_quote(LAYOUT)}: "
        f"cannot parse {go_quote(elem)} as {go_quote(layout_elem)}"
    )


def _message(value: str, message: str) -> ValueError:
    return ValueError(f"parsing time {go_quote(value)}{message}")


def _digit(text: str, index: int) -> bool:
    return index < len(text) and "0" <= text[index] <= "9"


def _fraction(text: str) -> tuple[int, str]:
    """A fraction after the seconds (Go's Parse takes `.` or `,`): nanoseconds, the rest."""
    if len(text) < 2 or text[0] not in ".," or not _digit(text, 1):
        return 0, text
    end = 2
    while _digit(text, end):
        end += 1
    return _nanos(text[1:end]), text[end:]


def _getnum(text: str, fixed: bool) -> tuple[int, str] | None:
    """Go's getnum: one or two leading digits (exactly two when fixed)."""
    if not _digit(text, 0):
        return None
    if not _digit(text, 1):
        return None if fixed else (int(text[0]), text[1:])
    return int(text[:2]), text[2:]


def _atoi(text: str) -> int | None:
    """Go's time.atoi: an optional sign, then digits only."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not all("0" <= c <= "9" for c in digits):
        return None
    return -int(digits) if text[:1] == "-" else int(digits)


def _moment(fields: tuple[int, int, int, int, int, int], nanos: int, offset: int) -> datetime:
    """The instant in the stamp's own offset; before year 1 UTC, the earliest datetime."""
    year, month, day, hour, minute, second = fields
    if year < 1:
        return _EARLIEST
    zone = UTC if offset == 0 else timezone(timedelta(seconds=offset))
    moment = datetime(year, month, day, hour, minute, second, nanos // 1000, tzinfo=zone)
    try:
        moment.replace(tzinfo=None) - timedelta(seconds=offset)
    except OverflowError:  # the instant lies outside what datetime can hold
        return _EARLIEST if year == 1 else moment
    return moment


def _is_zero(fields: tuple[int, int, int, int, int, int], nanos: int, offset: int) -> bool:
    year, month, day, hour, minute, second = fields
    if nanos or year not in (0, 1):
        return False
    day_of_year = sum(_days_in(m, year) for m in range(1, month)) + day
    days = day_of_year - 1 - (366 if year == 0 else 0)
    return days * 86400 + hour * 3600 + minute * 60 + second - offset == 0


def _nanos(fraction: str | None) -> int:
    return int((fraction or "")[:9].ljust(9, "0"))


def _fast(value: str) -> tuple[datetime, bool] | None:
    """Go's parseRFC3339: the reading, or None when Go falls back to `time.Parse`."""
    match = _FAST.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= _days_in(month, year)):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    offset = 0
    if match.group(8):
        offset_hours, offset_minutes = int(match.group(9)), int(match.group(10))
        if offset_hours > 23 or offset_minutes > 59:
            return None
        offset = (offset_hours * 60 + offset_minutes) * 60
        offset = -offset if match.group(8) == "-" else offset
    fields = (year, month, day, hour, minute, second)
    nanos = _nanos(match.group(7))
    return _moment(fields, nanos, offset), _is_zero(fields, nanos, offset)


def _layout_parse(value: str) -> tuple[tuple[int, int, int, int, int, int], int, int]:
    """Go's `time.Parse(time.RFC3339, value)`: the fields, nanoseconds and offset."""
    rest = value
    numbers: dict[str, int] = {}
    nanos = offset = 0
    for prefix, elem in _CHUNKS:
        if not rest.startswith(prefix):
            raise _cannot_parse(value, rest, prefix)
        rest = rest[len(prefix) :]
        hold, got, out_of_range = rest, None, None
        if elem == "2006":
            year = _atoi(rest[:4]) if len(rest) >= 4 else None
            got = None if year is None else (year, rest[4:])
        elif elem == "Z07:00":
            got, out_of_range, offset = _zone(rest)
        else:
            got = _getnum(rest, fixed=elem != "15")
            low, high, name = _RANGES.get(elem, (0, 99, ""))
            if got is not None and not low <= got[0] <= high:
                out_of_range = name
            elif got is not None and elem == "05":
                nanos, after = _fraction(got[1])
                got = (got[0], after)
        if out_of_range is not None:
            raise _message(value, f": {out_of_range} out of range")
        if got is None:
            raise _cannot_parse(value, hold, elem)
        numbers[elem], rest = got
    if rest:
        raise _message(value, f": extra text: {go_quote(rest)}")
    year, month, day = numbers["2006"], numbers["01"], numbers["02"]
    if day < 1 or day > _days_in(month, year):
        raise _message(value, ": day out of range")
    fields = (year, month, day, numbers["15"], numbers["04"], numbers["05"])
    return fields, nanos, offset


def _zone(rest: str) -> tuple[tuple[int, str] | None, str | None, int]:
    """The `Z07:00` element: (0, what follows) or None, a range error, the offset."""
    if rest[:1] == "Z":
        return (0, rest[1:]), None, 0
    if len(rest) < 6 or rest[3] != ":":
        return None, None, 0
    hours = _getnum(rest[1:3], True)
    minutes = _getnum(rest[4:6], True) if hours is not None else None
    hour, minute = (hours or (0, ""))[0], (minutes or (0, ""))[0]
    if minute > 60:  # Go checks both; the later check's text wins
        return None, "time zone offset minute", 0
    if hour > 24:
        return None, "time zone offset hour", 0
    if hours is None or minutes is None or rest[0] not in "+-":
        return None, None, 0
    offset = (hour * 60 + minute) * 60
    return (0, rest[6:]), None, -offset if rest[0] == "-" else offset


def parse(value: str) -> tuple[datetime, bool]:
    """(the instant, whether it is Go's zero time), or `ValueError` with Go's text."""
    fast = _fast(value)
    if fast is not None:
        return fast
    fields, nanos, offset = _layout_parse(value)
    # what `time.Parse` accepts and RFC 3339 does not
    if value[12] == ":":
        raise _cannot_parse(value, value[11], "15")
    if value[19] == ",":
        raise _cannot_parse(value, ",", ".")
    if value[-1] == "Z":
        raise _cannot_parse(value, value, LAYOUT)
    if int(value[-5:-3]) >= 24:
        raise _message(value, ": timezone hour out of range")
    if int(value[-2:]) >= 60:
        raise _message(value, ": timezone minute out of range")
    return _moment(fields, nanos, offset), _is_zero(fields, nanos, offset)
