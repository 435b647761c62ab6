"""How messages show the values they name: Go's `%q` (`strconv.Quote`), exactly.

OME's messages quote user text with `%q`. Go keeps printable characters as they are
(Unicode letters, marks, numbers, punctuation, symbols and the ASCII space, which is
also what `str.isprintable` keeps) and escapes the rest: `\\a \\b \\f \\n \\r \\t \\v`,
`\\xNN` for other bytes below 0x20 and for 0x7f, `\\uNNNN` or `\\UNNNNNNNN` for other
runes that do not print. A Go string may hold bytes that are not UTF-8; here they are
the lone surrogates U+DC80..U+DCFF that Python's `surrogateescape` decoding leaves,
and are shown as Go shows the byte (`\\xff`). Printable characters come from the
Unicode tables of this Python, which may be older than those of OME's Go for
characters assigned since.
"""

from __future__ import annotations

_NAMED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NAMED |= {"\v": "\\v", "\\": "\\\\", '"': '\\"'}


def quote(text: str) -> str:
    """`text` as Go's `%q` prints it: double quotes, Go's escapes where it escapes."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + "".join(map(_escaped, text)) + '"'


def _escaped(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    if char.isprintable():
        return char
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as surrogateescape keeps it
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:  # Go holds a lone surrogate as three bytes of bad UTF-8
        return "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
    if code < 0x80:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
