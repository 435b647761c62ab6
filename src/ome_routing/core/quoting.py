"""How messages show the values they name, in the style of OME's (Go) messages."""

from __future__ import annotations

import json


def quote(text: str) -> str:
    """Quote as Go's %q does for printable text: double quotes, escapes only where needed."""
    return json.dumps(text, ensure_ascii=False)


def json_kind(value: object) -> str:
    """The JSON kind of a decoded value, for messages such as `expected an object, got array`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
