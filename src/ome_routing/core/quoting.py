"""How messages show the values they name: Go's `%q` (`strconv.Quote`), exactly.

OME's messages and `kubectl ome` quote user text with `%q`; both the controller and the
plugin quote with `quote`. Go keeps printable characters as they are (Unicode letters,
marks, numbers, punctuation, symbols and the ASCII space, which is also what
`str.isprintable` keeps) and escapes the rest: `\\a \\b \\f \\n \\r \\t \\v`, `\\"` and
`\\\\`, `\\xNN` for other bytes below 0x20 and for 0x7f, `\\uNNNN` or `\\UNNNNNNNN` for
other runes that do not print.

A Go string may hold bytes that are not UTF-8, and Go writes each byte that does not start
a valid UTF-8 sequence as `\\xNN`. Here such a byte is the lone surrogate U+DC80..U+DCFF
that Python's `surrogateescape` decoding leaves for it (command-line arguments, file
names); any other lone surrogate stands for the three bytes Go would hold for it
(`surrogatepass`), which are not UTF-8 either. The text is read back as Go reads those
bytes, so escaped bytes that together form valid UTF-8 print as the character they
encode, as in Go. Printable characters come from the Unicode tables of this Python, which
may be older than those of OME's Go for characters assigned since.
"""

from __future__ import annotations

_NAMED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NAMED |= {"\v": "\\v", "\\": "\\\\", '"': '\\"'}


def quote(text: str) -> str:
    """`text` as Go's `%q` prints it: double quotes, Go's escapes where it escapes."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + "".join(map(_escaped, _as_go_reads(text))) + '"'


def _go_bytes(char: str) -> bytes:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return bytes((code - 0xDC00,))
    return char.encode("utf-8", "surrogatepass")


def _as_go_reads(text: str) -> str:
    """The text with every byte that Go would not decode as UTF-8 as U+DC80..U+DCFF."""
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    raw = b"".join(map(_go_bytes, text))
    # each byte of a sequence that is not UTF-8 comes back escaped alone, as Go writes it
    return raw.decode("utf-8", "surrogateescape")


def _escaped(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    if char.isprintable():
        return char
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
