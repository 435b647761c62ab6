"""FIELD/VALUE tables, as the `kubectl ome` reference prints them.

One row per fact; a field name is cut to 18 characters and a value to 56, each ending in
`...` when cut, so that one row stays on one line. `-o json` and `-o yaml` carry every
value uncut.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

FIELD_WIDTH = 18
VALUE_WIDTH = 56
OUTPUTS: tuple[str, ...] = ("table", "wide", "json", "yaml")

Row = tuple[str, str]


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters; a longer one keeps `width - 3` and ends in `...`."""
    if len(text) <= width:
        return text
    return text[: width - 3] + "..."


def one_line(text: str) -> str:
    """Control characters (line breaks included) shown escaped, so a value cannot forge rows."""
    return "".join(
        json.dumps(ch)[1:-1] if ch.isprintable() is False and ch != " " else ch for ch in text
    )


def render_fields(
    rows: Iterable[Row], *, header: tuple[str, str] = ("FIELD", "VALUE"), full: bool = False
) -> str:
    """A two-column table: the field column padded to the longest shown field plus 3 spaces.

    `full` keeps values uncut (a preview must show the exact change).
    """
    shown = [
        (cut(one_line(f), FIELD_WIDTH), one_line(v) if full else cut(one_line(v), VALUE_WIDTH))
        for f, v in rows
    ]
    width = max([len(header[0])] + [len(f) for f, _ in shown]) + 3
    lines = [f"{header[0]:<{width}}{header[1]}".rstrip()]
    lines += [f"{f:<{width}}{v}".rstrip() for f, v in shown]
    return "\n".join(lines) + "\n"


def render_document(document: Mapping[str, Any], output: str) -> str:
    """A whole report as JSON (two-space indent) or YAML, keys in the report's order."""
    if output == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if output == "yaml":
        return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True)
    raise ValueError(f"render_document takes json or yaml, got {output!r}")
