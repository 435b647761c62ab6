"""Go's `Decoder.Token`: a JSON token stream that reads and fails as Go's decoder does.

OME reads the `ome.io/traffic-drain` annotation one token at a time, and its errors
wrap the decoder's (`decode top-level object: EOF`, `override "a" field "cluster" must
be a string: json: cannot unmarshal number into Go value of type string`). This module
follows the decoder's token states; values are read by Go's scanner (`scanner`).

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

from ome_routing.core.gojson.scanner import (
    EOF,
    SPACE,
    GoEOF,
    GoJSONError,
    Number,
    kind,
    quote_char,
    read_value,
)


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
            if isinstance(value, Number):
                return _float64(value)
            assert value is None or isinstance(value, (str, bool))
            return value

    def string_value(self) -> str:
        """The next value decoded into a Go string: null gives ""."""
        value = self._decode()
        if value is None:
            return ""
        if isinstance(value, str) and not isinstance(value, Number):
            return value
        raise GoJSONError(f"json: cannot unmarshal {kind(value)} into Go value of type string")

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
        value, self._pos = read_value(self._text, self._pos)
        self._value_end()
        return value

    def _value_end(self) -> None:
        if self._state in (_State.ARRAY_START, _State.ARRAY_VALUE):
            self._state = _State.ARRAY_COMMA
        elif self._state is _State.OBJECT_VALUE:
            self._state = _State.OBJECT_COMMA

    def _peek_or_none(self) -> str | None:
        while self._pos < len(self._text) and self._text[self._pos] in SPACE:
            self._pos += 1
        return self._text[self._pos] if self._pos < len(self._text) else None

    def _peek(self) -> str:
        char = self._peek_or_none()
        if char is None:
            raise GoEOF(EOF)
        return char

    def _token_error(self, char: str) -> GoJSONError:
        return GoJSONError(f"invalid character {quote_char(char)}{_CONTEXT.get(self._state, '')}")


def _float64(number: Number) -> float:
    """A number token as Go's decoder stores it in an `interface{}`: a float64."""
    value = float(number)
    if math.isinf(value):
        raise GoJSONError(f"json: cannot unmarshal number {number} into Go value of type float64")
    return value
