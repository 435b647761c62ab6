"""Tables and documents as `kubectl ome` prints them.

- `render_table(headers, rows)`: columns padded to their widest cell plus three spaces,
  the padding after a row's last non-empty cell left out; cells have their control and
  bidirectional characters escaped, so that a value cannot forge rows.
- `render_fields(rows)`: the FIELD/VALUE table of OME's reports, a field cut to 18 columns
  and a value to 56, each ending in `...` when cut (`bounded=False` keeps values whole).
- `render_document(document, output)`: `-o json` or `-o yaml`, as OME's CLI writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ome_routing.kubectl.gotext import bounded_cell, display_width, go_json, go_yaml, sanitize_cell

FIELD_WIDTH = 18
VALUE_WIDTH = 56
PADDING = 3
OUTPUTS: tuple[str, ...] = ("table", "wide", "json", "yaml")

Row = tuple[str, str]


def render_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    clean = [[sanitize_cell(cell) for cell in row] for row in [list(headers), *rows]]
    columns = max(len(row) for row in clean)
    widths = [0] * columns
    for row in clean:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], display_width(cell))
    lines: list[str] = []
    for row in clean:
        line = ""
        end = 0
        for index in range(columns):
            cell = row[index] if index < len(row) else ""
            line += cell
            if cell:
                end = len(line)
            if index < columns - 1:
                line += " " * (widths[index] - display_width(cell) + PADDING)
        lines.append(line[:end])
    return "\n".join(lines) + "\n"


def render_fields(
    rows: Iterable[Row], *, header: tuple[str, str] = ("FIELD", "VALUE"), bounded: bool = True
) -> str:
    """A FIELD/VALUE table; `bounded` cuts fields and values as OME's reports do."""
    if bounded:
        shown = [
            (bounded_cell(field, FIELD_WIDTH), bounded_cell(value, VALUE_WIDTH))
            for field, value in rows
        ]
    else:
        shown = list(rows)
    return render_table(header, shown)


def render_document(document: Mapping[str, Any], output: str) -> str:
    """A whole report as JSON (two-space indent) or YAML (keys sorted), as Go writes them."""
    if output == "json":
        return go_json(document)
    if output == "yaml":
        return go_yaml(document)
    raise ValueError(f"render_document takes json or yaml, got {output!r}")
