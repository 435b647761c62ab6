"""A whole JSON document read as Go's `json.Unmarshal` reads it into a struct.

OME decodes a report with `json.Unmarshal`, and its error text follows the
`capacity response is not a valid report: ` prefix. Python's `json` module reads the
usual body fast; only a body it refuses goes to Go's scanner (`scanner`), which gives
Go's exact text, or reads the body itself where Go accepts what Python cannot (nesting
deeper than Python's recursion allows). On top of that, what a struct decoder needs:

- the members of the top-level object in order, each with its raw text, since Go hands
  a `time.Time` the raw bytes of its value (escapes included) and reports a number
  that does not fit by its literal text;
- object keys matched to field names as Go matches them: exactly, else case-folded.

Bytes that are not UTF-8 read as U+FFFD inside strings, as Go reads them; outside
them, Go names the byte it refuses. Nothing here raises but `GoJSONError`.
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable, Iterator

from ome_routing.core.gojson.scanner import (
    END_OF_INPUT,
    GoJSONError,
    Number,
    read_document,
    read_value,
)

#: Go's whitespace between tokens; Python's json module skips the same four.
_SPACE = re.compile(r"[ \t\n\r]*")
#: the json module's string reader: (text, index after the opening quote) -> (value, end)
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _refuse_constant(token: str) -> object:
    """NaN and Infinity: Python's json module reads them, JSON does not."""
    raise ValueError(token)


_DECODER = json.JSONDecoder(parse_int=Number, parse_float=Number, parse_constant=_refuse_constant)


def decode(body: bytes) -> tuple[str, object]:
    """The body as text (bad UTF-8 as U+FFFD) and its document, numbers as `Number`.

    Raises `GoJSONError` with Go's text when the body is not JSON.
    """
    text = body.decode("utf-8", errors="replace")
    if not text.strip(" \t\n\r"):  # an empty body (a HEAD poll) is common: no exception
        raise GoJSONError(END_OF_INPUT)
    try:
        return text, _DECODER.decode(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        pass
    read_document(body.decode("utf-8", errors="surrogateescape"))  # Go's error, if any
    return text, read_document(text)


def members(text: str) -> Iterator[tuple[str, str, object]]:
    """(key, raw value text, value) for each member of a top-level object, in order.

    `text` must have been decoded by `decode`, with an object at the top.
    """
    pos = _SPACE.match(text, 0).end() + 1  # type: ignore[union-attr]
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
    if text[pos] == "}":
        return
    while True:
        key, pos = _scanstring(text, pos + 1)
        pos = _SPACE.match(text, pos).end() + 1  # type: ignore[union-attr]
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except RecursionError:  # deeper than Python reads, not than Go does
            value, end = read_value(text, pos)
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
