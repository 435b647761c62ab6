"""Go's JSON scanner: whole documents read and refused as `json.Unmarshal` does."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ome_routing.core.gojson import GoJSONError, Number, kind, quote_char, read_document


def error_of(text: str) -> str:
    with pytest.raises(GoJSONError) as caught:
        read_document(text)
    return str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "unexpected end of JSON input"),
        (" \n", "unexpected end of JSON input"),
        ('{"a": "x', "unexpected end of JSON input"),
        ("[1,", "unexpected end of JSON input"),
        ('{"a"', "unexpected end of JSON input"),
        ("x", "invalid character 'x' looking for beginning of value"),
        ("[,", "invalid character ',' looking for beginning of value"),
        ('{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        ("{1:2}", "invalid character '1' looking for beginning of object key string"),
        ('{"a" 1}', "invalid character '1' after object key"),
        ('{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        ("[1 2]", "invalid character '2' after array element"),
        ("{} x", "invalid character 'x' after top-level value"),
        ("01", "invalid character '1' after top-level value"),
        ("[01]", "invalid character '1' after array element"),
        ('"a\tb"', "invalid character '\\t' in string literal"),
        ('"\\q"', "invalid character 'q' in string escape code"),
        ('"\\u12x4"', "invalid character 'x' in \\u hexadecimal character escape"),
        ("-x", "invalid character 'x' in numeric literal"),
        ("1.x", "invalid character 'x' after decimal point in numeric literal"),
        ("1ex", "invalid character 'x' in exponent of numeric literal"),
        ("trUe", "invalid character 'U' in literal true (expecting 'u')"),
        ("nul!", "invalid character '!' in literal null (expecting 'l')"),
        ("NaN", "invalid character 'N' looking for beginning of value"),
        ("-Infinity", "invalid character 'I' in numeric literal"),
    ],
)
def test_syntax_errors_carry_gos_text(text: str, message: str) -> None:
    assert error_of(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.", "invalid character ' ' after decimal point in numeric literal"),
        ("-", "invalid character ' ' in numeric literal"),
        ("1e", "invalid character ' ' in exponent of numeric literal"),
        ("1e+", "invalid character ' ' in exponent of numeric literal"),
        ("tru", "invalid character ' ' in literal true (expecting 'e')"),
        ("[fa", "invalid character ' ' in literal false (expecting 'l')"),
        ('"\\', "invalid character ' ' in string escape code"),
        ('"\\u12', "invalid character ' ' in \\u hexadecimal character escape"),
    ],
)
def test_at_the_end_go_feeds_a_space_and_names_it_where_it_does_not_fit(
    text: str, message: str
) -> None:
    assert error_of(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\udcff\udcfe{}", "invalid character 'ÿ' looking for beginning of value"),
        ("[\udc80]", "invalid character '\\u0080' looking for beginning of value"),
        ("\ufeff{}", "invalid character 'ï' looking for beginning of value"),
        ("[é]", "invalid character 'Ã' looking for beginning of value"),
        ('{"a":1}\u00a0', "invalid character 'Â' after top-level value"),
    ],
)
def test_a_byte_beyond_ascii_is_named_as_gos_byte_scanner_names_it(text: str, message: str) -> None:
    """Not UTF-8 (held by surrogateescape) or the first byte of a character, as Latin-1."""
    assert error_of(text) == message


def test_nesting_is_read_to_gos_limit_and_refused_past_it() -> None:
    deepest = "[" * 10_000 + "]" * 10_000
    value = read_document(deepest)
    for _ in range(9_999):
        assert isinstance(value, list)
        value = value[0]
    assert value == []
    assert error_of("[" * 10_001 + "]" * 10_001) == "invalid character '[' exceeded max depth"
    assert error_of("[" * 10_000 + "{}" + "]" * 10_000) == (
        "invalid character '{' exceeded max depth"
    )


def test_numbers_are_kept_as_their_literal_text() -> None:
    assert read_document('{"a": [-0, 1.50, 2E+3]}') == {"a": ["-0", "1.50", "2E+3"]}
    value = read_document("1.50")
    assert isinstance(value, Number)
    assert value == "1.50"


def test_strings_are_read_as_go_reads_them() -> None:
    assert read_document('"a\\"b\\\\c\\/d\\n\\u00e9"') == 'a"b\\c/d\n\u00e9'
    assert read_document('"\\ud83d\\ude00 \\ud83d"') == "\U0001f600 \ufffd"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_reads_what_python_writes_as_python_reads_it(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert read_document(text) == json.loads(text, parse_int=str)


@pytest.mark.parametrize(
    ("char", "shown"),
    [
        ("x", "'x'"),
        ("'", "'\\''"),
        ('"', "'\"'"),
        ("\\", "'\\\\'"),
        ("\x01", "'\\x01'"),
        ("\x7f", "'\\x7f'"),
        ("\t", "'\\t'"),
        ("\n", "'\\n'"),
        ("\a", "'\\a'"),
        ("\v", "'\\v'"),
        ("<", "'<'"),
        (" ", "' '"),
        ("\udcff", "'ÿ'"),
        ("\udcad", "'\\u00ad'"),
        ("\u00e9", "'Ã'"),
    ],
)
def test_characters_are_named_as_gos_scanner_names_them(char: str, shown: str) -> None:
    assert quote_char(char) == shown


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "bool"),
        (Number("4"), "number"),
        ("4", "string"),
        ([], "array"),
        ({}, "object"),
    ],
)
def test_kinds_have_gos_names(value: object, name: str) -> None:
    assert kind(value) == name
