"""Go's JSON scanner: one value read as `encoding/json` reads it, failing in its words.

Go checks syntax one byte at a time and names the byte it refuses with `quoteChar`
(`invalid character 'x' after object key`). This reader follows the same grammar, in
the same order, with the same messages, and builds the value as it goes, with its own
stack rather than recursion (Go allows 10,000 levels; Python's `json` fewer).

Input is text; a byte that is not UTF-8 is one of U+DC80..U+DCFF (Python's
`surrogateescape`), so that an error names the byte as Go does. Outside strings a
character beyond ASCII is named by its first UTF-8 byte, as Go's byte scanner sees it.

Two ways to meet the end of input, as Go's two readers do:
- `Mode.DOCUMENT` is `json.Unmarshal`: the whole text is one value; at the end Go feeds
  the scanner a space, so a number cut short fails on `' '`, and anything else still
  open is `unexpected end of JSON input`.
- `Mode.STREAM` is `Decoder.Decode`: one value from a position, the rest left unread;
  input that ends inside the value is `unexpected EOF`.

Numbers are kept as `Number`, their literal text, for the caller to judge. Errors:
`GoJSONError`, whose `str()` is Go's text.
"""

from __future__ import annotations

import re
from enum import Enum, auto

from ome_routing.core.quoting import quote

END_OF_INPUT = "unexpected end of JSON input"
EOF = "EOF"
UNEXPECTED_EOF = "unexpected EOF"
MAX_DEPTH = 10_000  # Go's maxNestingDepth
SPACE = " \t\r\n"

_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')
_DIGITS = re.compile(r"[0-9]*")
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS: dict[str, tuple[str, object]] = {
    "t": ("true", True),
    "f": ("false", False),
    "n": ("null", None),
}


class GoJSONError(ValueError):
    """A JSON error worded as Go's; `eof` is true for Go's `io.EOF` (nothing left)."""

    eof = False


class GoEOF(GoJSONError):
    """Go's `io.EOF`: the input held nothing but space where a token was due."""

    eof = True


class Number(str):
    """A JSON number, unread: its literal text, for the caller to judge."""

    __slots__ = ()


class Mode(Enum):
    DOCUMENT = auto()
    STREAM = auto()


def quote_char(char: str) -> str:
    """Go's `quoteChar`: the byte a syntax error names, `'x'`, `'\\n'`, `'\\''`."""
    code = ord(char)
    if not 0xDC80 <= code <= 0xDCFF:
        code = char.encode("utf-8", "surrogatepass")[0]
    else:
        code -= 0xDC00
    if code == 0x27:
        return "'\\''"
    if code == 0x22:
        return "'\"'"
    return f"'{quote(chr(code))[1:-1]}'"


def kind(value: object) -> str:
    """Go's name for a decoded value's kind in its type errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Number):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def read_document(text: str) -> object:
    """The one value that `text` holds, or `GoJSONError` as `json.Unmarshal` words it."""
    value, pos = _Reader(text, Mode.DOCUMENT).value(0)
    pos = _skip(text, pos)
    if pos < len(text):
        raise _fail(text[pos], "after top-level value")
    return value


def read_value(text: str, pos: int) -> tuple[object, int]:
    """The value at `pos` and the position after it, as `Decoder.Decode` reads it."""
    return _Reader(text, Mode.STREAM).value(pos)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in SPACE:
        pos += 1
    return pos


def _fail(char: str, context: str) -> GoJSONError:
    return GoJSONError(f"invalid character {quote_char(char)} {context}")


class _Reader:
    def __init__(self, text: str, mode: Mode) -> None:
        self._text = text
        self._mode = mode

    def _at(self, pos: int, on_space: str | None = None) -> str:
        """The character at `pos`; at the end, Go's error for the state reading it.

        `on_space` is the context in which that state refuses a space, the byte Go
        feeds a document's scanner at the end.
        """
        if pos < len(self._text):
            return self._text[pos]
        if self._mode is Mode.STREAM:
            raise GoJSONError(UNEXPECTED_EOF)
        if on_space is not None:
            raise _fail(" ", on_space)
        raise GoJSONError(END_OF_INPUT)

    def value(self, pos: int) -> tuple[object, int]:
        # each open container with the key its next member goes under
        stack: list[tuple[list[object] | dict[str, object], str]] = []
        text = self._text
        while True:
            pos = _skip(text, pos)
            char = self._at(pos)
            item: object
            if char in "[{":
                if len(stack) >= MAX_DEPTH:
                    raise _fail(char, "exceeded max depth")
                pos = _skip(text, pos + 1)
                close = "]" if char == "[" else "}"
                if self._at(pos) != close:
                    if char == "[":
                        stack.append(([], ""))
                    else:
                        key, pos = self._key(pos)
                        stack.append(({}, key))
                    continue
                item, pos = ([] if char == "[" else {}), pos + 1
            else:
                item, pos = self._scalar(pos, char)
            while True:  # the value ends: it joins its container, which may end too
                if not stack:
                    return item, pos
                container, key = stack[-1]
                if isinstance(container, list):
                    container.append(item)
                    close, context = "]", "after array element"
                else:
                    container[key] = item
                    close, context = "}", "after object key:value pair"
                pos = _skip(text, pos)
                char = self._at(pos)
                if char == close:
                    stack.pop()
                    item, pos = container, pos + 1
                    continue
                if char != ",":
                    raise _fail(char, context)
                pos += 1
                if isinstance(container, dict):
                    key, pos = self._key(pos)
                    stack[-1] = (container, key)
                break

    def _key(self, pos: int) -> tuple[str, int]:
        """An object key and its colon; the position after them."""
        pos = _skip(self._text, pos)
        char = self._at(pos)
        if char != '"':
            raise _fail(char, "looking for beginning of object key string")
        key, pos = self._string(pos + 1)
        pos = _skip(self._text, pos)
        char = self._at(pos)
        if char != ":":
            raise _fail(char, "after object key")
        return key, pos + 1

    def _scalar(self, pos: int, char: str) -> tuple[object, int]:
        if char == '"':
            return self._string(pos + 1)
        if char == "-" or "0" <= char <= "9":
            return self._number(pos)
        if char in _LITERALS:
            return self._literal(pos)
        raise _fail(char, "looking for beginning of value")

    def _string(self, pos: int) -> tuple[str, int]:
        text = self._text
        out: list[str] = []
        while True:
            end = _PLAIN.match(text, pos).end()  # type: ignore[union-attr]
            out.append(text[pos:end])
            char = self._at(end)
            if char == '"':
                return _join_surrogates("".join(out)), end + 1
            if char != "\\":
                raise _fail(char, "in string literal")
            escape = self._at(end + 1, "in string escape code")
            if escape in _ESCAPES:
                out.append(_ESCAPES[escape])
                pos = end + 2
            elif escape == "u":
                for digit_at in range(end + 2, end + 6):
                    digit = self._at(digit_at, "in \\u hexadecimal character escape")
                    if digit not in _HEX:
                        raise _fail(digit, "in \\u hexadecimal character escape")
                out.append(chr(int(text[end + 2 : end + 6], 16)))
                pos = end + 6
            else:
                raise _fail(escape, "in string escape code")

    def _digit(self, pos: int, context: str) -> int:
        """The position after a run of digits that must not be empty."""
        char = self._at(pos, context)
        if not "0" <= char <= "9":
            raise _fail(char, context)
        return _DIGITS.match(self._text, pos).end()  # type: ignore[union-attr]

    def _number(self, start: int) -> tuple[object, int]:
        text = self._text
        pos = start + 1 if text[start] == "-" else start
        if self._at(pos, "in numeric literal") == "0":
            pos += 1
        else:
            pos = self._digit(pos, "in numeric literal")
        if pos < len(text) and text[pos] == ".":
            pos = self._digit(pos + 1, "after decimal point in numeric literal")
        if pos < len(text) and text[pos] in "eE":
            pos += 1
            if self._at(pos, "in exponent of numeric literal") in "+-":
                pos += 1
            pos = self._digit(pos, "in exponent of numeric literal")
        return Number(text[start:pos]), pos

    def _literal(self, pos: int) -> tuple[object, int]:
        word, value = _LITERALS[self._text[pos]]
        for index, expected in enumerate(word[1:], start=1):
            context = f"in literal {word} (expecting {quote_char(expected)})"
            char = self._at(pos + index, context)
            if char != expected:
                raise _fail(char, context)
        return value, pos + len(word)


def _join_surrogates(text: str) -> str:
    """Pair escaped UTF-16 surrogates; a lone one becomes U+FFFD, as in Go."""
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if "\ud800" <= char <= "\udbff" and index + 1 < len(text):
            low = text[index + 1]
            if "\udc00" <= low <= "\udfff":
                out.append(chr(0x10000 + ((ord(char) - 0xD800) << 10) + (ord(low) - 0xDC00)))
                index += 2
                continue
        out.append("\ufffd" if "\ud800" <= char <= "\udfff" else char)
        index += 1
    return "".join(out)
