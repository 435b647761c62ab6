"""The JSON token stream reads and fails as Go's encoding/json Decoder does."""

from __future__ import annotations

import pytest

from ome_routing.core.gojson import (
    Delim,
    GoJSONError,
    Token,
    TokenStream,
    format_token,
)


def tokens(text: str) -> list[Token]:
    stream = TokenStream(text)
    found: list[Token] = []
    while True:
        try:
            found.append(stream.token())
        except GoJSONError as err:
            assert err.eof, str(err)
            return found


def first_error(text: str) -> str:
    stream = TokenStream(text)
    with pytest.raises(GoJSONError) as caught:
        while True:
            stream.token()
    return str(caught.value)


def test_tokens_of_a_document_skip_commas_and_colons() -> None:
    assert tokens('{"a": [1, true, null, "x"], "b": -2.5e1}') == [
        Delim("{"),
        "a",
        Delim("["),
        1.0,
        True,
        None,
        "x",
        Delim("]"),
        "b",
        -25.0,
        Delim("}"),
    ]


def test_nothing_but_space_is_eof() -> None:
    with pytest.raises(GoJSONError) as caught:
        TokenStream(" \n\t").token()
    assert (str(caught.value), caught.value.eof) == ("EOF", True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "invalid character 'x' looking for beginning of value"),
        ('"abc', "unexpected EOF"),
        ('"a\nb"', "invalid character '\\n' in string literal"),
        ('"\\q"', "invalid character 'q' in string escape code"),
        ('"\\u12x4"', "invalid character 'x' in \\u hexadecimal character escape"),
        ("tru", "unexpected EOF"),
        ("trUe", "invalid character 'U' in literal true (expecting 'u')"),
        ("nul!", "invalid character '!' in literal null (expecting 'l')"),
        ("-x", "invalid character 'x' in numeric literal"),
        ("1.x", "invalid character 'x' after decimal point in numeric literal"),
        ("1e+", "unexpected EOF"),
        ("1ex", "invalid character 'x' in exponent of numeric literal"),
        ("1e999", "json: cannot unmarshal number 1e999 into Go value of type float64"),
        ('{"a" 1}', "invalid character '1' after object key"),
        ('{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        ('{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        ("{1:2}", "invalid character '1'"),
        ("[1 2]", "invalid character '2' after array element"),
        ("[1,]", "invalid character ']' looking for beginning of value"),
        ("}", "invalid character '}' looking for beginning of value"),
        ("'x'", "invalid character '\\'' looking for beginning of value"),
    ],
)
def test_syntax_errors_carry_gos_text(text: str, message: str) -> None:
    assert first_error(text) == message


@pytest.mark.parametrize(
    ("text", "value", "error"),
    [
        ('{"k":"v"}', "v", None),
        ('{"k":null}', "", None),
        ('{"k":7}', None, "json: cannot unmarshal number into Go value of type string"),
        ('{"k":false}', None, "json: cannot unmarshal bool into Go value of type string"),
        ('{"k":[1]}', None, "json: cannot unmarshal array into Go value of type string"),
        ('{"k":{"x":1}}', None, "json: cannot unmarshal object into Go value of type string"),
        ('{"k" "v"}', None, "expected colon after object key"),
        ('{"k":', None, "EOF"),
        ('{"k":[1', None, "unexpected EOF"),
    ],
)
def test_a_value_decoded_into_a_string(text: str, value: str | None, error: str | None) -> None:
    stream = TokenStream(text)
    assert stream.token() == Delim("{")
    assert stream.token() == "k"
    if error is None:
        assert stream.string_value() == value
        assert stream.token() == Delim("}")
        return
    with pytest.raises(GoJSONError) as caught:
        stream.string_value()
    assert str(caught.value) == error


def test_more_is_false_at_a_closing_delimiter_or_the_end() -> None:
    stream = TokenStream('{"a":"b"}')
    assert stream.more()
    stream.token()
    assert stream.more()
    stream.token()
    stream.string_value()
    assert not stream.more()
    stream.token()
    assert not stream.more()


@pytest.mark.parametrize("text", ["1.", "-", '"\\', "[1, tru"])
def test_input_ending_inside_a_value_is_an_unexpected_eof(text: str) -> None:
    """The decoder says `unexpected EOF` where `json.Unmarshal` names the space it feeds."""
    assert first_error(text) == "unexpected EOF"


def test_a_number_at_the_very_end_is_a_whole_token() -> None:
    assert tokens("[12")[-1] == 12.0
    assert tokens("12") == [12.0]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"k":[1e999, "x"]}', "json: cannot unmarshal array into Go value of type string"),
        ('{"k":[1e999 x]}', "invalid character 'x' after array element"),
    ],
)
def test_a_value_read_whole_is_checked_before_any_number_in_it_is_converted(
    text: str, error: str
) -> None:
    """Go reads a value's syntax first; a string field holding an array is a type error."""
    stream = TokenStream(text)
    stream.token()
    stream.token()
    with pytest.raises(GoJSONError) as caught:
        stream.string_value()
    assert str(caught.value) == error


def test_escaped_surrogate_pairs_join_and_a_lone_one_is_replaced() -> None:
    assert tokens('"\\ud83d\\ude00"') == ["\U0001f600"]
    assert tokens('"a\\ud83db"') == ["a\ufffdb"]


@pytest.mark.parametrize(
    ("token", "shown"),
    [
        (Delim("{"), "{"),
        ("text", "text"),
        (None, "<nil>"),
        (True, "true"),
        (5.0, "5"),
        (-0.0, "-0"),
        (1.5, "1.5"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e-05, "1e-05"),
    ],
)
def test_tokens_print_as_gos_percent_v(token: Token, shown: str) -> None:
    assert format_token(token) == shown
