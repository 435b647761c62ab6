"""A JSON token stream that reads and fails as Go's `encoding/json` `Decoder.Token` does.

OME reads the `ome.io/traffic-drain` annotation one token at a time, and its errors
wrap the decoder's (`decode top-level object: EOF`, `override "a" field "cluster" must
be a string: json: cannot unmarshal number into Go value of type string`). Python's
`json` module reads whole documents and words its errors differently, so this module
follows the Go decoder's states and its scanner's messages instead.

- `TokenStream.token()` is `Decoder.Token`: `Delim` for `{ } [ ]`, `str` for a string,
  `float`/`bool`/None for the other scalars; commas and colons are consumed silently.
- `TokenStream.string_value()` is `Decoder.Decode` into a Go `string`: `null` leaves it
  empty, another kind of value is an unmarshal error.
- `TokenStream.more()` is `Decoder.More`.

Errors: `GoJSONError`, whose `str()` is Go's text; `eof` is true for Go's `io.EOF`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, auto

_SPACE = " \t\r\n"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS: dict[str, tuple[str, object]] = {
    "t": ("true", True),
    "f": ("false", False),
    "n": ("null", None),
}
_HEX = "0123456789abcdefABCDEF"


class GoJSONError(ValueError):
    """The decoder's error, worded as Go's."""

    def __init__(self, text: str, *, eof: bool = False) -> None:
        super().__init__(text)
        self.eof = eof


@dataclass(frozen=True, slots=True)
class Delim:
    """One of `{ } [ ]`, as Go's `json.Delim`."""

    char: str

    def __str__(self) -> str:
        return self.char


Token = Delim | str | float | bool | None


class _State(Enum):
    TOP_VALUE = auto()
    ARRAY_START = auto()
    ARRAY_VALUE = auto()
    ARRAY_COMMA = auto()
    OBJECT_START = auto()
    OBJECT_KEY = auto()
    OBJECT_COLON = auto()
    OBJECT_VALUE = auto()
    OBJECT_COMMA = auto()


_VALUE_ALLOWED = {_State.TOP_VALUE, _State.ARRAY_START, _State.ARRAY_VALUE, _State.OBJECT_VALUE}
_CONTEXT = {
    _State.TOP_VALUE: " looking for beginning of value",
    _State.ARRAY_START: " looking for beginning of value",
    _State.ARRAY_VALUE: " looking for beginning of value",
    _State.OBJECT_VALUE: " looking for beginning of value",
    _State.ARRAY_COMMA: " after array element",
    _State.OBJECT_KEY: " looking for beginning of object key string",
    _State.OBJECT_COLON: " after object key",
    _State.OBJECT_COMMA: " after object key:value pair",
}

EOF = "EOF"
UNEXPECTED_EOF = "unexpected EOF"


def quote_char(char: str) -> str:
    """A character as Go's scanner names it: `'x'`, `'\\n'`, `'\\''`."""
    # Go's scanner reads bytes: a character beyond ASCII shows as its first byte.
    code = char.encode("utf-8", "surrogatepass")[0]
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r"}
    if code in named:
        return f"'{named[code]}'"
    if code < 0x20 or code == 0x7F:
        return f"'\\x{code:02x}'"
    if code == 0x5C:
        return "'\\\\'"
    if code < 0x80:
        return f"'{chr(code)}'"
    if code < 0xA0 or code == 0xAD:
        return f"'\\u{code:04x}'"
    return f"'{chr(code)}'"


def format_token(token: Token) -> str:
    """A token as Go's `%v` prints it."""
    if isinstance(token, Delim):
        return token.char
    if token is None:
        return "<nil>"
    if isinstance(token, bool):
        return "true" if token else "false"
    if isinstance(token, float):
        if token == 0:
            return "-0" if math.copysign(1.0, token) < 0 else "0"
        if token.is_integer() and abs(token) < 1e21:
            return str(int(token))
        return repr(token)
    return token


class TokenStream:
    """Go's `json.Decoder` token API over one string."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._state = _State.TOP_VALUE
        self._stack: list[_State] = []

    # --- Decoder.More / Token / Decode ---------------------------------------------

    def more(self) -> bool:
        char = self._peek_or_none()
        return char is not None and char not in "]}"

    def token(self) -> Token:
        while True:
            char = self._peek()
            if char in "[{":
                if self._state not in _VALUE_ALLOWED:
                    raise self._token_error(char)
                self._pos += 1
                self._stack.append(self._state)
                self._state = _State.ARRAY_START if char == "[" else _State.OBJECT_START
                return Delim(char)
            if char in "]}":
                opened = (
                    (_State.ARRAY_START, _State.ARRAY_COMMA)
                    if char == "]"
                    else (_State.OBJECT_START, _State.OBJECT_COMMA)
                )
                if self._state not in opened:
                    raise self._token_error(char)
                self._pos += 1
                self._state = self._stack.pop()
                self._value_end()
                return Delim(char)
            if char == ":":
                if self._state is not _State.OBJECT_COLON:
                    raise self._token_error(char)
                self._pos += 1
                self._state = _State.OBJECT_VALUE
                continue
            if char == ",":
                if self._state is _State.ARRAY_COMMA:
                    self._state = _State.ARRAY_VALUE
                elif self._state is _State.OBJECT_COMMA:
                    self._state = _State.OBJECT_KEY
                else:
                    raise self._token_error(char)
                self._pos += 1
                continue
            if char == '"' and self._state in (_State.OBJECT_START, _State.OBJECT_KEY):
                old, self._state = self._state, _State.TOP_VALUE
                try:
                    key = self._decode()
                finally:
                    self._state = old
                self._state = _State.OBJECT_COLON
                assert isinstance(key, str)
                return key
            if self._state not in _VALUE_ALLOWED:
                raise self._token_error(char)
            value = self._decode()
            assert value is None or isinstance(value, (str, float, bool))
            return value

    def string_value(self) -> str:
        """The next value decoded into a Go string: null gives ""."""
        value = self._decode()
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        raise GoJSONError(f"json: cannot unmarshal {_go_kind(value)} into Go value of type string")

    # --- internals -----------------------------------------------------------------

    def _decode(self) -> object:
        if self._state is _State.OBJECT_COLON:
            if self._peek() != ":":
                raise GoJSONError("expected colon after object key")
            self._pos += 1
            self._state = _State.OBJECT_VALUE
        elif self._state is _State.ARRAY_COMMA:
            if self._peek() != ",":
                raise GoJSONError("expected comma after array element")
            self._pos += 1
            self._state = _State.ARRAY_VALUE
        if self._state not in _VALUE_ALLOWED:
            raise GoJSONError("not at beginning of value")
        self._peek()  # nothing but space left is io.EOF, not "unexpected EOF"
        value, self._pos = _Scanner(self._text).value(self._pos)
        self._value_end()
        return value

    def _value_end(self) -> None:
        if self._state in (_State.ARRAY_START, _State.ARRAY_VALUE):
            self._state = _State.ARRAY_COMMA
        elif self._state is _State.OBJECT_VALUE:
            self._state = _State.OBJECT_COMMA

    def _peek_or_none(self) -> str | None:
        while self._pos < len(self._text) and self._text[self._pos] in _SPACE:
            self._pos += 1
        return self._text[self._pos] if self._pos < len(self._text) else None

    def _peek(self) -> str:
        char = self._peek_or_none()
        if char is None:
            raise GoJSONError(EOF, eof=True)
        return char

    def _token_error(self, char: str) -> GoJSONError:
        return GoJSONError(f"invalid character {quote_char(char)}{_CONTEXT.get(self._state, '')}")


def _go_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "number"
    return "array" if isinstance(value, list) else "object"


class _Scanner:
    """One whole JSON value from a position, failing with Go's scanner messages."""

    def __init__(self, text: str) -> None:
        self._text = text

    def _at(self, pos: int) -> str:
        if pos >= len(self._text):
            raise GoJSONError(UNEXPECTED_EOF)
        return self._text[pos]

    def _skip(self, pos: int) -> int:
        while pos < len(self._text) and self._text[pos] in _SPACE:
            pos += 1
        return pos

    def _fail(self, char: str, context: str) -> GoJSONError:
        return GoJSONError(f"invalid character {quote_char(char)} {context}")

    def value(self, pos: int) -> tuple[object, int]:
        pos = self._skip(pos)
        char = self._at(pos)
        if char == "{":
            return self._object(pos + 1)
        if char == "[":
            return self._array(pos + 1)
        if char == '"':
            return self._string(pos + 1)
        if char == "-" or (char.isascii() and char.isdigit()):
            return self._number(pos)
        if char in _LITERALS:
            return self._literal(pos)
        raise self._fail(char, "looking for beginning of value")

    def _object(self, pos: int) -> tuple[object, int]:
        result: dict[str, object] = {}
        pos = self._skip(pos)
        if self._at(pos) == "}":
            return result, pos + 1
        while True:
            pos = self._skip(pos)
            if self._at(pos) != '"':
                raise self._fail(self._at(pos), "looking for beginning of object key string")
            key, pos = self._string(pos + 1)
            pos = self._skip(pos)
            if self._at(pos) != ":":
                raise self._fail(self._at(pos), "after object key")
            result[key], pos = self.value(pos + 1)
            pos = self._skip(pos)
            char = self._at(pos)
            if char == "}":
                return result, pos + 1
            if char != ",":
                raise self._fail(char, "after object key:value pair")
            pos += 1

    def _array(self, pos: int) -> tuple[object, int]:
        result: list[object] = []
        pos = self._skip(pos)
        if self._at(pos) == "]":
            return result, pos + 1
        while True:
            item, pos = self.value(pos)
            result.append(item)
            pos = self._skip(pos)
            char = self._at(pos)
            if char == "]":
                return result, pos + 1
            if char != ",":
                raise self._fail(char, "after array element")
            pos += 1

    def _string(self, pos: int) -> tuple[str, int]:
        out: list[str] = []
        while True:
            char = self._at(pos)
            if char == '"':
                return _join_surrogates("".join(out)), pos + 1
            if char < " ":
                raise self._fail(char, "in string literal")
            if char != "\\":
                out.append(char)
                pos += 1
                continue
            escape = self._at(pos + 1)
            if escape in _ESCAPES:
                out.append(_ESCAPES[escape])
                pos += 2
            elif escape == "u":
                digits = ""
                for offset in range(2, 6):
                    digit = self._at(pos + offset)
                    if digit not in _HEX:
                        raise self._fail(digit, "in \\u hexadecimal character escape")
                    digits += digit
                out.append(chr(int(digits, 16)))
                pos += 6
            else:
                raise self._fail(escape, "in string escape code")

    def _digits(self, pos: int) -> int:
        while pos < len(self._text) and self._text[pos].isascii() and self._text[pos].isdigit():
            pos += 1
        return pos

    def _number(self, start: int) -> tuple[object, int]:
        pos = start
        if self._text[pos] == "-":
            pos += 1
            if not (self._at(pos).isascii() and self._at(pos).isdigit()):
                raise self._fail(self._at(pos), "in numeric literal")
        pos = pos + 1 if self._text[pos] == "0" else self._digits(pos)
        if pos < len(self._text) and self._text[pos] == ".":
            pos += 1
            if not (self._at(pos).isascii() and self._at(pos).isdigit()):
                raise self._fail(self._at(pos), "after decimal point in numeric literal")
            pos = self._digits(pos)
        if pos < len(self._text) and self._text[pos] in "eE":
            pos += 1
            if self._at(pos) in "+-":
                pos += 1
            if not (self._at(pos).isascii() and self._at(pos).isdigit()):
                raise self._fail(self._at(pos), "in exponent of numeric literal")
            pos = self._digits(pos)
        text = self._text[start:pos]
        number = float(text)
        if math.isinf(number):
            raise GoJSONError(f"json: cannot unmarshal number {text} into Go value of type float64")
        return number, pos

    def _literal(self, pos: int) -> tuple[object, int]:
        word, value = _LITERALS[self._text[pos]]
        for index, expected in enumerate(word[1:], start=1):
            char = self._at(pos + index)
            if char != expected:
                raise self._fail(char, f"in literal {word} (expecting {quote_char(expected)})")
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
