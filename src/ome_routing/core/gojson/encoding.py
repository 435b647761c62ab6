"""JSON written as Go's `encoding/json` writes it.

`marshal` is `json.Marshal`, `marshal_indent` is `json.MarshalIndent(value, "", "  ")`:
`<`, `>`, `&`, U+2028 and U+2029 escaped as Go escapes them (`\\u003c`...), other
non-ASCII text kept as UTF-8. Map keys are written in the caller's order: sort them where
Go would (a Go map's keys are always sorted).
"""

from __future__ import annotations

import json
import re

_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}
_HTML_ESCAPES["\u2029"] = "\\u2029"
_HTML = re.compile("[<>&\u2028\u2029]")


def escape_html(text: str) -> str:
    """JSON text with Go's HTML escapes (its `HTMLEscape`)."""
    return _HTML.sub(lambda match: _HTML_ESCAPES[match.group(0)], text)


def marshal(value: object) -> str:
    """`value` as `json.Marshal` writes it: no spaces."""
    return escape_html(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def marshal_indent(value: object) -> str:
    """`value` as `json.MarshalIndent(value, "", "  ")` writes it."""
    return escape_html(json.dumps(value, indent=2, ensure_ascii=False))
