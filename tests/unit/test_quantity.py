"""Kubernetes quantities for capacity factors: exact values and the canonical form."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ome_routing.core.quantity import QuantityError, QuantityFormat, parse_quantity


@pytest.mark.parametrize(
    ("text", "canonical", "value"),
    [
        ("3", "3", Fraction(3)),
        ("1.5", "1500m", Fraction(3, 2)),
        ("500m", "500m", Fraction(1, 2)),
        ("0.5", "500m", Fraction(1, 2)),
        (".5", "500m", Fraction(1, 2)),
        ("5.", "5", Fraction(5)),
        ("2k", "2k", Fraction(2000)),
        ("2000", "2k", Fraction(2000)),
        ("1500", "1500", Fraction(1500)),
        ("1.5k", "1500", Fraction(1500)),
        ("+3", "3", Fraction(3)),
        ("-1.5", "-1500m", Fraction(-3, 2)),
        ("0", "0", Fraction(0)),
        ("0m", "0", Fraction(0)),
        ("1n", "1n", Fraction(1, 10**9)),
        ("250u", "250u", Fraction(1, 4000)),
        ("3M", "3M", Fraction(3 * 10**6)),
        ("1G", "1G", Fraction(10**9)),
        ("1T", "1T", Fraction(10**12)),
        ("1P", "1P", Fraction(10**15)),
        ("1E", "1E", Fraction(10**18)),
        ("1000E", "1000E", Fraction(10**21)),
    ],
)
def test_decimal_quantities_print_in_canonical_form(
    text: str, canonical: str, value: Fraction
) -> None:
    quantity = parse_quantity(text)
    assert quantity.value == value
    assert str(quantity) == canonical


@pytest.mark.parametrize(
    ("text", "canonical", "value"),
    [
        ("1Ki", "1Ki", Fraction(1024)),
        ("1024Ki", "1Mi", Fraction(1024**2)),
        ("2Gi", "2Gi", Fraction(2 * 1024**3)),
        ("1Ti", "1Ti", Fraction(1024**4)),
        ("1Pi", "1Pi", Fraction(1024**5)),
        ("1Ei", "1Ei", Fraction(1024**6)),
        ("1.5Ki", "1536", Fraction(1536)),
        ("0.5Ki", "512", Fraction(512)),
        ("0.5Mi", "512Ki", Fraction(512 * 1024)),
        ("0.001Ki", "1024m", Fraction(1024, 1000)),
    ],
)
def test_binary_quantities_print_binary_only_when_exact_and_large(
    text: str, canonical: str, value: Fraction
) -> None:
    quantity = parse_quantity(text)
    assert quantity.value == value
    assert str(quantity) == canonical


@pytest.mark.parametrize(
    ("text", "canonical", "value"),
    [
        ("1e3", "1e3", Fraction(1000)),
        ("1E3", "1e3", Fraction(1000)),
        ("1.5e3", "1500", Fraction(1500)),
        ("1.5e0", "1500e-3", Fraction(3, 2)),
        ("5e-1", "500e-3", Fraction(1, 2)),
        ("2e+6", "2e6", Fraction(2 * 10**6)),
    ],
)
def test_exponent_quantities_keep_exponent_form(text: str, canonical: str, value: Fraction) -> None:
    quantity = parse_quantity(text)
    assert quantity.format is QuantityFormat.DECIMAL_EXPONENT
    assert quantity.value == value
    assert str(quantity) == canonical


def test_values_finer_than_a_nano_unit_round_up_away_from_zero() -> None:
    assert parse_quantity("0.0000000001").value == Fraction(1, 10**9)
    assert parse_quantity("1.0000000001").value == Fraction(10**9 + 1, 10**9)
    assert parse_quantity("-0.0000000001").value == Fraction(-1, 10**9)


def test_canonical_form_parses_back_to_the_same_value() -> None:
    for text in ["1.5", "0.25", "3", "1Ki", "1.5Ki", "7e2", "123456789m", "0.000001"]:
        quantity = parse_quantity(text)
        assert parse_quantity(str(quantity)).value == quantity.value


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "1 ",
        " 1",
        "abc",
        "1x",
        "1e",
        "1ki",
        "1KI",
        "1Kii",
        ".",
        "+",
        "-",
        "1.2.3",
        "1,5",
        "1e1.5",
        "0x10",
        "½",
    ],
)
def test_text_that_is_not_a_quantity_is_refused_naming_the_text(text: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(text)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(f'quantity "{text}" is not a Kubernetes quantity')


def test_hostile_exponents_and_lengths_are_refused_without_work() -> None:
    with pytest.raises(QuantityError, match="exponent beyond"):
        parse_quantity("1e999999999")
    with pytest.raises(QuantityError, match="more than 100 digits"):
        parse_quantity("1" * 101)
