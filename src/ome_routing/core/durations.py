"""Durations that parse and print exactly as Go's `time.Duration` does.

OME's messages quote durations (`routing.capacity.period (500ms) must be at least
routing.observer.minPeriod (1s)`), so `str(Duration)` must match Go's
`Duration.String()` byte for byte: `500ms`, `10s`, `1m30s`, `1.5s`, `2h45m0s`.

Errors: `DurationError` (a `ValueError`) for text that is not a Go duration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from functools import total_ordering

NANOSECOND = 1
MICROSECOND = 1_000 * NANOSECOND
MILLISECOND = 1_000 * MICROSECOND
SECOND = 1_000 * MILLISECOND
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

_UNITS: dict[str, int] = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "\u00b5s": MICROSECOND,  # micro sign, as Go prints it
    "\u03bcs": MICROSECOND,  # Greek small letter mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
_MAX_NS = (1 << 63) - 1  # Go's Duration is an int64 of nanoseconds
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]+)")


class DurationError(ValueError):
    """The text is not a Go duration."""


@total_ordering
@dataclass(frozen=True, slots=True)
class Duration:
    """A span of time in whole nanoseconds, printed the way Go prints it."""

    nanoseconds: int

    @classmethod
    def parse(cls, text: str) -> Duration:
        return parse_duration(text)

    @classmethod
    def of_seconds(cls, seconds: float) -> Duration:
        return cls(round(seconds * SECOND))

    @property
    def seconds(self) -> float:
        return self.nanoseconds / SECOND

    def as_timedelta(self) -> timedelta:
        return timedelta(microseconds=self.nanoseconds // MICROSECOND)

    def __mul__(self, factor: int) -> Duration:
        return Duration(self.nanoseconds * factor)

    __rmul__ = __mul__

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Duration):
            return NotImplemented
        return self.nanoseconds < other.nanoseconds

    def __str__(self) -> str:
        return format_duration(self.nanoseconds)


def parse_duration(text: str) -> Duration:
    """Parse Go duration text such as `10s`, `1m30s`, `1.5s` or `-2h`.

    Like Go: a unit is required on every number (`"10"` fails), except for `"0"`;
    fractions are truncated to whole nanoseconds; the result must fit an int64.
    """
    original = text
    sign = 1
    if text[:1] in ("+", "-"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return Duration(0)
    if not text:
        raise DurationError(f"invalid duration {original!r}")
    total = 0
    pos = 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            raise DurationError(f"invalid duration {original!r}")
        whole, frac, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not frac:
            raise DurationError(f"invalid duration {original!r}")
        if unit not in _UNITS:
            raise DurationError(f"unknown unit {unit!r} in duration {original!r}")
        scale = _UNITS[unit]
        value = int(whole or "0") * scale
        if frac:
            value += int(frac) * scale // 10 ** len(frac)
        total += value
        if total > _MAX_NS + (1 if sign < 0 else 0):
            raise DurationError(f"invalid duration {original!r}")
        pos = match.end()
    return Duration(sign * total)


def _frac(value: int, precision: int) -> tuple[str, int]:
    """Go's fmtFrac: the fraction of value / 10**precision without trailing zeros."""
    digits = ""
    printed = False
    for _ in range(precision):
        digit = value % 10
        printed = printed or digit != 0
        if printed:
            digits = str(digit) + digits
        value //= 10
    return ("." + digits if printed else ""), value


def format_duration(nanoseconds: int) -> str:
    """Go's `time.Duration.String()`."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < SECOND:
        if u < MICROSECOND:
            return f"{sign}{u}ns"
        if u < MILLISECOND:
            frac, whole = _frac(u, 3)
            return f"{sign}{whole}{frac}\u00b5s"
        frac, whole = _frac(u, 6)
        return f"{sign}{whole}{frac}ms"
    frac, whole_seconds = _frac(u, 9)
    out = f"{whole_seconds % 60}{frac}s"
    minutes = whole_seconds // 60
    if minutes > 0:
        out = f"{minutes % 60}m{out}"
        hours = minutes // 60
        if hours > 0:
            out = f"{hours}h{out}"
    return sign + out
