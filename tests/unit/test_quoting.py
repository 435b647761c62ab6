"""Values in messages are quoted as Go's `%q` (strconv.Quote) quotes them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ome_routing.core.quoting import quote
from ome_routing.kubectl import gotext

PRINTABLE_ASCII = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E))


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        # Go's strconv quotetests, the bytes of "abc\xffdef" as surrogateescape holds them
        ("\a\b\f\r\n\t\v", '"\\a\\b\\f\\r\\n\\t\\v"'),
        ("\\", '"\\\\"'),
        ("abc\udcffdef", '"abc\\xffdef"'),
        ("\u263a", '"\u263a"'),
        ("\U0010ffff", '"\\U0010ffff"'),
        ("\x04", '"\\x04"'),
        ("!\u00a0!\u2000!\u3000!", '"!\\u00a0!\\u2000!\\u3000!"'),
        ("\x7f", '"\\x7f"'),
    ],
)
def test_quotes_as_gos_strconv_tests(text: str, quoted: str) -> None:
    assert quote(text) == quoted


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("", '""'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a/b", '"a/b"'),
        ("\x00\x01\x1f", '"\\x00\\x01\\x1f"'),
        ("caf\u00e9 \u00fc\u00df", '"caf\u00e9 \u00fc\u00df"'),
        ("\u00ad", '"\\u00ad"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("\ufeff", '"\\ufeff"'),
        ("\U0001f600", '"\U0001f600"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("\ud800", '"\\xed\\xa0\\x80"'),
    ],
)
def test_escapes_only_what_go_escapes(text: str, quoted: str) -> None:
    """Control bytes as \\xNN, runes that do not print as \\u or \\U, printable text kept."""
    assert quote(text) == quoted


@given(PRINTABLE_ASCII)
def test_printable_ascii_reads_as_before(text: str) -> None:
    """On printable ASCII, messages read as they did when quoted as JSON strings."""
    assert quote(text) == json.dumps(text, ensure_ascii=False)


def go_string(raw: bytes) -> str:
    """The bytes of a Go string as Python holds them (a byte that is not UTF-8: U+DCxx)."""
    return raw.decode("utf-8", "surrogateescape")


#: Each Go string's `strconv.Quote` (and `fmt.Sprintf("%q")`), as go1.26 prints it.
GO_QUOTED = [
    (b"", '""'),
    (b"plain", '"plain"'),
    (b"\a\b\f\n\r\t\v", r'"\a\b\f\n\r\t\v"'),
    (b'say "hi" \\', r'"say \"hi\" \\"'),
    (b"\x00\x01\x1f\x7f", r'"\x00\x01\x1f\x7f"'),
    (b"caf\xc3\xa9 \xc3\xbc", '"caf\u00e9 \u00fc"'),
    (b"\xc2\xa0\xe2\x80\x80\xe3\x80\x80", r'"\u00a0\u2000\u3000"'),
    (b"\xc2\x80\xc2\x9f", r'"\u0080\u009f"'),
    (b"\xc2\xad", r'"\u00ad"'),
    (b"\xe2\x80\xa8\xe2\x80\xa9", r'"\u2028\u2029"'),
    (b"\xef\xbb\xbf", r'"\ufeff"'),
    (b"\xf0\x9f\x98\x80", '"\U0001f600"'),
    (b"\xf3\xa0\x80\x81", r'"\U000e0001"'),
    (b"\xf4\x8f\xbf\xbf", r'"\U0010ffff"'),
    (b"\xee\x80\x80", r'"\ue000"'),
    (b"\xf3\xb0\x80\x80", r'"\U000f0000"'),
    (b"\xcd\xb8", r'"\u0378"'),
    (b"\xd8\x9c", r'"\u061c"'),
    (b"\xe2\x80\x8b", r'"\u200b"'),
    (b"\xcc\x80a", '"\u0300a"'),
    (b"\xef\xbf\xbd", '"\ufffd"'),
    (b"\xe2\x82\xac", '"\u20ac"'),
    # bytes that are not UTF-8: each one alone as \xNN
    (b"abc\xffdef", r'"abc\xffdef"'),
    (b"\xc3", r'"\xc3"'),
    (b"\xe2\x82A", r'"\xe2\x82A"'),
    (b"\xed\xa0\x80", r'"\xed\xa0\x80"'),
    (b"\xc0\xaf", r'"\xc0\xaf"'),
    (b"\xf4\x90\x80\x80", r'"\xf4\x90\x80\x80"'),
    (b"\x80", r'"\x80"'),
    (b"\xf0\x9f\x98", r'"\xf0\x9f\x98"'),
    (b"\xc3\xa9\xff", '"\u00e9\\xff"'),
]


@pytest.mark.parametrize(
    ("raw", "quoted"), GO_QUOTED, ids=[r.hex() or "empty" for r, _ in GO_QUOTED]
)
def test_quotes_every_string_as_go_does_invalid_utf8_included(raw: bytes, quoted: str) -> None:
    assert quote(go_string(raw)) == quoted


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        # a lone surrogate stands for the three bytes Go would hold, none of them UTF-8
        ("\ud800", r'"\xed\xa0\x80"'),
        ("a\udfff", r'"a\xed\xbf\xbf"'),
        # escaped bytes that together are UTF-8 are the character, as Go reads the bytes
        ("\udcc3\udca9", '"\u00e9"'),
    ],
)
def test_surrogates_are_quoted_as_the_bytes_they_stand_for(text: str, quoted: str) -> None:
    assert quote(text) == quoted


def test_the_plugin_has_no_quoting_of_its_own() -> None:
    """`kubectl ome` quotes with the controller's `quote`: one implementation."""
    assert not hasattr(gotext, "go_quote")
