"""Durations that parse and print exactly as Go's `time.Duration` does.

OME's messages quote durations (`routing.capacity.period (500ms) must be at least
routing.observer.minPeriod (1s)`), so `str(Duration)` must match Go's
`Duration.String()` byte for byte: `500ms`, `10s`, `1m30s`, `1.5s`, `2h45m0s`.
Parsing follows Go's `time.ParseDuration` step for step, fractions included: Go
scales a fraction in float64, and so do we, so that a value such as `0.3333333333333333333h`
reads as `20m0s` here as it does in Go.

Errors: `DurationError` (a `ValueError`) for text that is not a Go duration; its
message is Go's without the `time: ` prefix, quoting the text as Go does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
_LIMIT = 1 << 63  # Go's Duration is an int64 of nanoseconds; the parser works in uint64
MAX_NANOSECONDS = _LIMIT - 1
MIN_NANOSECONDS = -_LIMIT
_DIGITS = frozenset("0123456789")  # ASCII only: Go does not read other scripts' digits


class DurationError(ValueError):
    """The text is not a Go duration."""


@total_ordering
@dataclass(frozen=True, slots=True)
class Duration:
    """A span of time in whole nanoseconds, printed the way Go prints it."""

    nanoseconds: int
    #: the span in seconds (derived): asked for several times on every poll
    seconds: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", self.nanoseconds / SECOND)

    @classmethod
    def parse(cls, text: str) -> Duration:
        return parse_duration(text)

    @classmethod
    def of_seconds(cls, seconds: float) -> Duration:
        return cls(round(seconds * SECOND))

    def as_timedelta(self) -> timedelta:
        """The duration in whole microseconds, truncated toward zero (as Go's division)."""
        micros = abs(self.nanoseconds) // MICROSECOND
        return timedelta(microseconds=-micros if self.nanoseconds < 0 else micros)

    def ceil_timedelta(self) -> timedelta:
        """The shortest whole-microsecond span at least this long.

        `datetime` counts microseconds, so `age >= duration` holds exactly when
        `age >= duration.ceil_timedelta()`.
        """
        return timedelta(microseconds=-(-self.nanoseconds // MICROSECOND))

    def __mul__(self, factor: int) -> Duration:
        return Duration(self.nanoseconds * factor)

    __rmul__ = __mul__

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Duration):
            return NotImplemented
        return self.nanoseconds < other.nanoseconds

    def __str__(self) -> str:
        return format_duration(self.nanoseconds)


def go_quote(text: str) -> str:
    """Quote text as Go's time package does in its errors: double quotes, `\\xNN` escapes."""
    out = ['"']
    for char in text:
        if char < " " or char >= "\x80":
            raw = char.encode("utf-8", "surrogatepass")
            out.extend(f"\\x{byte:02x}" for byte in raw)
        else:
            if char in '"\\':
                out.append("\\")
            out.append(char)
    out.append('"')
    return "".join(out)


def _invalid(original: str) -> DurationError:
    return DurationError(f"invalid duration {go_quote(original)}")


def _leading_int(text: str, pos: int) -> tuple[int, int] | None:
    """Go's leadingInt: the digits at pos as an integer, or None when it overflows."""
    value = 0
    while pos < len(text) and text[pos] in _DIGITS:
        if value > _LIMIT // 10:
            return None
        value = value * 10 + ord(text[pos]) - 48
        if value > _LIMIT:
            return None
        pos += 1
    return value, pos


def _leading_fraction(text: str, pos: int) -> tuple[int, float, int]:
    """Go's leadingFraction: digits that fit, their scale as a float, and where they end."""
    value = 0
    scale = 1.0
    overflow = False
    while pos < len(text) and text[pos] in _DIGITS:
        if not overflow:
            if value > MAX_NANOSECONDS // 10:
                overflow = True
            else:
                candidate = value * 10 + ord(text[pos]) - 48
                if candidate > _LIMIT:
                    overflow = True
                else:
                    value = candidate
                    scale *= 10
        pos += 1
    return value, scale, pos


def parse_duration(text: str) -> Duration:
    """Parse Go duration text such as `10s`, `1m30s`, `1.5s` or `-2h`.

    Like Go: a unit is required on every number (`"10"` fails), except for `"0"`;
    fractions are truncated to whole nanoseconds; the result must fit an int64.
    """
    original = text
    negative = False
    if text[:1] in ("+", "-"):
        negative = text[0] == "-"
        text = text[1:]
    if text == "0":
        return Duration(0)
    if not text:
        raise _invalid(original)
    total = 0
    pos = 0
    while pos < len(text):
        if not (text[pos] == "." or text[pos] in _DIGITS):
            raise _invalid(original)
        start = pos
        leading = _leading_int(text, pos)
        if leading is None:
            raise _invalid(original)
        whole, pos = leading
        had_whole = pos != start
        fraction, scale, had_fraction = 0, 1.0, False
        if pos < len(text) and text[pos] == ".":
            fraction, scale, end = _leading_fraction(text, pos + 1)
            had_fraction = end != pos + 1
            pos = end
        if not had_whole and not had_fraction:
            raise _invalid(original)  # no digits, as in ".s"
        unit_start = pos
        while pos < len(text) and not (text[pos] == "." or text[pos] in _DIGITS):
            pos += 1
        if pos == unit_start:
            raise DurationError(f"missing unit in duration {go_quote(original)}")
        unit_text = text[unit_start:pos]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(
                f"unknown unit {go_quote(unit_text)} in duration {go_quote(original)}"
            )
        if whole > _LIMIT // unit:
            raise _invalid(original)
        value = whole * unit
        if fraction > 0:
            # float64, as Go: exact to the nanosecond for fractions of an hour
            value += int(float(fraction) * (float(unit) / scale))
            if value > _LIMIT:
                raise _invalid(original)
        total += value
        if total > _LIMIT:
            raise _invalid(original)
    if negative:
        return Duration(-total)
    if total > MAX_NANOSECONDS:
        raise _invalid(original)
    return Duration(total)


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
