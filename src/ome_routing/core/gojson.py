"""JSON read as Go's `encoding/json` reads it into a struct, for the `Report` format.

OME decodes a report with Go's decoder, and its error text follows the
`capacity response is not a valid report: ` prefix. Python's `json` module checks the
syntax (Go checks the whole input before it decodes anything, and so do we); this
module adds what Go does differently:

- syntax errors in Go's words where Python's map onto them (`unexpected end of JSON
  input`, `invalid character '<' looking for beginning of value`), else Python's;
- the members of the top-level object in order, each with its raw text, since Go hands
  a `time.Time` the raw bytes of its value (escapes included) and reports a number
  that does not fit by its literal text;
- object keys matched to field names as Go matches them: exactly, else case-folded.

Bytes that are not UTF-8 read as U+FFFD, as Go reads them inside strings (and outside
them, both refuse the byte). Nothing here raises but `GoSyntaxError`.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable, Iterator

#: Go's whitespace between tokens; Python's json module skips the same four.
_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES |= {"\v": "\\v", "\\": "\\\\"}

END_OF_INPUT = "unexpected end of JSON input"
#: the json module's string reader: (text, index after the opening quote) -> (value, end)
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class GoSyntaxError(ValueError):
    """The text is not JSON; `str(error)` is Go's text where it is known, else Python's."""


def quote_char(char: str) -> str:
    """Go's `quoteChar`: a character as its syntax errors show it, `'<'`, `'\\n'`."""
    if char == "'":
        return "'\\''"
    if char in _ESCAPES:
        return f"'{_ESCAPES[char]}'"
    if char < " " or char == "\x7f":
        return f"'\\x{ord(char):02x}'"
    return f"'{char}'"


def _innermost(text: str) -> str:
    """`{` or `[`: the container open at the end of `text` (valid JSON up to there)."""
    depth: list[str] = []
    for char in _STRING.sub("", text):
        if char in "{[":
            depth.append(char)
        elif char in "}]" and depth:
            depth.pop()
    return depth[-1] if depth else "{"


def _go_detail(err: json.JSONDecodeError) -> str | None:
    """Go's text for a syntax error that Python found, or None where they part ways."""
    text, pos, msg = err.doc, err.pos, err.msg
    if msg.startswith("Unterminated string") or not text[pos:].strip(" \t\n\r"):
        return END_OF_INPUT
    char = text[pos]
    if msg == "Invalid \\escape":
        return f"invalid character {quote_char(text[pos + 1])} in string escape code"
    if msg == "Invalid \\uXXXX escape":
        digits = text[pos + 1 : pos + 5]
        bad = next((c for c in digits if c not in _HEX), None)
        if bad is None:
            return None
        return f"invalid character {quote_char(bad)} in \\u hexadecimal character escape"
    if not char.isascii():
        return None
    if msg == "Invalid control character at":
        return f"invalid character {quote_char(char)} in string literal"
    context = {
        "Expecting value": "looking for beginning of value",
        "Expecting property name enclosed in double quotes": (
            "looking for beginning of object key string"
        ),
        "Expecting ':' delimiter": "after object key",
        "Extra data": "after top-level value",
    }.get(msg)
    if msg == "Expecting ',' delimiter":
        inside = _innermost(text[:pos])
        context = "after object key:value pair" if inside == "{" else "after array element"
    if context is None:
        return None
    return f"invalid character {quote_char(char)} {context}"


class _NotJson(ValueError):
    """A token that Python's json module accepts and JSON does not (NaN, Infinity)."""


_CONSTANTS = {
    "NaN": "invalid character 'N' looking for beginning of value",
    "Infinity": "invalid character 'I' looking for beginning of value",
    "-Infinity": "invalid character 'I' in numeric literal",
}


def _reject_constant(token: str) -> object:
    raise _NotJson(_CONSTANTS[token])


class Number(str):
    """A JSON number, unread: the struct decoder judges its raw text."""

    __slots__ = ()


_DECODER = json.JSONDecoder(parse_int=Number, parse_float=Number, parse_constant=_reject_constant)


def read_text(body: bytes) -> str:
    """The body as text, as Go's decoder sees it: invalid UTF-8 reads as U+FFFD."""
    return body.decode("utf-8", errors="replace")


def check(text: str) -> object:
    """The document (numbers as `Number`), or `GoSyntaxError` as Go words it."""
    if not text.strip(" \t\n\r"):
        raise GoSyntaxError(END_OF_INPUT)
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as err:
        detail = _go_detail(err)
        if detail is None:
            detail = f"{err.msg} at line {err.lineno} column {err.colno}"
        raise GoSyntaxError(detail) from None
    except _NotJson as err:
        raise GoSyntaxError(str(err)) from None
    except RecursionError:
        raise GoSyntaxError("JSON nested too deeply") from None


def members(text: str) -> Iterator[tuple[str, str, object]]:
    """(key, raw value text, value) for each member of a top-level object, in order.

    `text` must have passed `check` with an object at the top.
    """
    pos = _SPACE.match(text, 0).end() + 1  # type: ignore[union-attr]
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
    if text[pos] == "}":
        return
    while True:
        key, pos = _scanstring(text, pos + 1)
        pos = _SPACE.match(text, pos).end() + 1  # type: ignore[union-attr]
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        value, end = _DECODER.raw_decode(text, pos)
        yield key, text[pos:end], value
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text[pos] == "}":
            return
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]


def fold(name: str) -> str:
    """Go's key folding for field names: ASCII upper case; other letters upper(lower(c))."""
    out = []
    for char in name:
        if char.isascii():
            out.append(char.upper())
            continue
        lower = char.lower()
        upper = lower.upper() if len(lower) == 1 else char
        out.append(upper if len(upper) == 1 else char)
    return "".join(out)


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
