"""Values in messages are quoted as Go's `%q` (strconv.Quote) quotes them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ome_routing.core.quoting import quote

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
