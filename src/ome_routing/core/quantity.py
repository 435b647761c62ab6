"""Kubernetes resource quantities, as capacity factors use them.

A quantity is a signed decimal number followed by a suffix: a decimal SI suffix
(`n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`), a binary SI suffix (`Ki`, `Mi`,
`Gi`, `Ti`, `Pi`, `Ei`) or a decimal exponent (`e3`, `E-2`). Values finer than a
nano-unit round up (away from zero), as the Kubernetes API server does.

`str(quantity)` is the canonical form the API server stores, so a factor reads back
the same way in the TrafficMap: `1.5` is `1500m`, `2000` is `2k`, `1024` written as
`1Ki` stays `1Ki`. The value itself is an exact `Fraction`: weights never go through
floating point.

Errors: `QuantityError` (a `ValueError`) from `parse_quantity`, naming the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from ome_routing.core.quoting import quote

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_POWER = {power: suffix for suffix, power in _BINARY_SUFFIXES.items()}

_QUANTITY = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(.*)", re.ASCII | re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)", re.ASCII)
#: Bounds that keep a hostile quantity (`1e999999999`) from costing time or memory.
_MAX_EXPONENT = 1000
_MAX_DIGITS = 100
_NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


class QuantityFormat(StrEnum):
    """How a quantity was written, which decides how it prints."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity and the format it was written in."""

    value: Fraction
    format: QuantityFormat = QuantityFormat.DECIMAL_SI

    def __str__(self) -> str:
        return _canonical(self.value, self.format)


def parse_quantity(text: str) -> Quantity:
    """Parse a Kubernetes quantity such as `1.5`, `500m`, `2k`, `1Ki` or `1e3`."""
    match = _QUANTITY.fullmatch(text)
    if match is None:  # pragma: no cover - the pattern matches every string
        raise _error(text)
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    if not whole and not fraction:
        raise _error(text)
    if len(whole) + len(fraction) > _MAX_DIGITS:
        raise QuantityError(f"quantity {quote(text)} has more than {_MAX_DIGITS} digits")
    number = Fraction(int(whole or "0")) + Fraction(int(fraction or "0"), 10 ** len(fraction))
    if sign == "-":
        number = -number
    value, fmt = _apply_suffix(text, number, suffix)
    return Quantity(_round_to_nano(value), fmt)


def _apply_suffix(text: str, number: Fraction, suffix: str) -> tuple[Fraction, QuantityFormat]:
    if suffix in _DECIMAL_SUFFIXES:
        return number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return number * 2 ** _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    exponent_match = _EXPONENT.fullmatch(suffix)
    if exponent_match is None:
        raise _error(text)
    exponent = int(exponent_match.group(1))
    if abs(exponent) > _MAX_EXPONENT:
        raise QuantityError(
            f"quantity {quote(text)} has an exponent beyond +/-{_MAX_EXPONENT}",
        )
    return number * Fraction(10) ** exponent, QuantityFormat.DECIMAL_EXPONENT


def _error(text: str) -> QuantityError:
    return QuantityError(
        f"quantity {quote(text)} is not a Kubernetes quantity "
        '(use forms like "2", "1.5", "500m", "2k", "1Ki", "1e3")'
    )


def _round_to_nano(value: Fraction) -> Fraction:
    """Round away from zero to a whole number of nano-units."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    magnitude = -(-abs(scaled.numerator) // scaled.denominator)
    return Fraction(magnitude if value > 0 else -magnitude) * _NANO


def _canonical(value: Fraction, fmt: QuantityFormat) -> str:
    if value == 0:
        return "0"
    if fmt is QuantityFormat.BINARY_SI:
        # Small or fractional binary quantities print in decimal, so nothing is rounded.
        if -1024 < value < 1024 or value.denominator != 1:
            return _canonical_decimal(value, QuantityFormat.DECIMAL_SI)
        return _canonical_binary(value.numerator)
    return _canonical_decimal(value, fmt)


def _canonical_binary(number: int) -> str:
    power = 0
    while number % 1024 == 0 and power < 60:
        number //= 1024
        power += 10
    return f"{number}{_BINARY_BY_POWER.get(power, '')}"


def _canonical_decimal(value: Fraction, fmt: QuantityFormat) -> str:
    """An integer mantissa and an exponent that is a multiple of 3, as high as exact."""
    exponent = 0
    mantissa = value
    while mantissa.denominator != 1:
        mantissa *= 10
        exponent -= 1
    whole = mantissa.numerator
    while whole != 0 and whole % 10 == 0:
        whole //= 10
        exponent += 1
    while exponent % 3 != 0:
        whole *= 10
        exponent -= 1
    if fmt is QuantityFormat.DECIMAL_EXPONENT:
        return f"{whole}e{exponent}" if exponent else str(whole)
    # Decimal SI has suffixes from nano to exa; beyond exa the mantissa grows instead.
    while exponent > 18:
        whole *= 1000
        exponent -= 3
    return f"{whole}{_DECIMAL_BY_EXPONENT[exponent]}"
