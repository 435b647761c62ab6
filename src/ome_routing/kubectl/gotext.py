"""Text as OME's CLI (Go) writes it: JSON and YAML documents, bounded table cells, name checks.

- `go_json` is `encoding/json`'s `MarshalIndent` with two spaces and a trailing newline;
  `go_json_compact` is `json.Marshal` (both `core.gojson.encoding`, which the drain
  annotation is written with too).
- `go_yaml` is `sigs.k8s.io/yaml`: keys sorted, lists not indented under their key, and
  strings that need quotes in double quotes.
- `bounded_cell(value, width)` is a table cell as OME's printers make it: control and
  bidirectional characters escaped, cut to `width` terminal columns, `...` when cut.
- `sanitize(value, width)` is OME's `safetext.Sanitize`: `[REDACTED]` for text shaped like a
  credential, else the bounded cell.
- `public_name` / `public_namespace`: a DNS-1123 subdomain (label) that `sanitize` keeps.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import yaml

from ome_routing.core.gojson.encoding import marshal, marshal_indent
from ome_routing.core.names import dns1123_label_problems, dns1123_subdomain_problems

__all__ = [
    "GO_SPACE",
    "bounded_cell",
    "display_width",
    "go_json",
    "go_json_compact",
    "go_trim_space",
    "go_yaml",
    "is_control",
    "public_name",
    "public_namespace",
    "safe_text",
    "sanitize",
    "sanitize_cell",
]

#: What Go's `strings.TrimSpace` trims (Unicode White_Space).
GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000"
)
_CREDENTIAL_SHAPES = tuple(
    re.compile(pattern)
    for pattern in (
        r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        r"sk-(?:[A-Za-z0-9_-]{20,})",
        r"(?:^|[^A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?:$|[^A-Z0-9])",
        r"eyJ[A-Za-z0-9_-]{3,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}",
        r"(?i)(?:^|[^A-Za-z0-9_])bearer[\t\n\v\f\r ]+[A-Za-z0-9._~+/-]{4,}",
        r"(?i)(?:^|[^A-Za-z0-9])(?:token|password|secret|api[_-]?key|authorization|credential)"
        r"[\t\n\v\f\r ]*[:=][\t\n\v\f\r ]*[^\t\n\v\f\r ]{4,}",
        r"-----BEGIN (?:[A-Z0-9 ]+ )?PRIVATE KEY-----",
    )
)
_MAX_INSPECTION_BYTES = 8192
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ZWJ = "\u200d"


def go_json(document: Mapping[str, Any]) -> str:
    """A report as `json.MarshalIndent(document, "", "  ")` plus a newline."""
    return marshal_indent(document) + "\n"


#: A value as `json.Marshal` writes it: no spaces; map keys sorted by the caller.
go_json_compact = marshal


class _GoYAMLDumper(yaml.SafeDumper):
    """PyYAML, writing as go-yaml does: double quotes where a string needs quoting."""

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style


def _sorted(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted(item) for item in value]
    return value


def go_yaml(document: Mapping[str, Any]) -> str:
    """A report as `sigs.k8s.io/yaml` writes it (through JSON: keys sorted)."""
    return yaml.dump(
        _sorted(document),
        Dumper=_GoYAMLDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=80,
    )


def is_control(char: str) -> bool:
    """Go's `unicode.IsControl`: C0 and C1 control characters."""
    return unicodedata.category(char) == "Cc"


def go_trim_space(text: str) -> str:
    return text.strip(GO_SPACE)


def safe_text(value: str, limit: int, space: bool) -> bool:
    """OME's `safeText`: at most `limit` bytes of UTF-8 with no control character
    (and no space at all unless `space`)."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    if size > limit:
        return False
    return not any(is_control(ch) or (not space and ch in GO_SPACE) for ch in value)


# --- table cells ------------------------------------------------------------------------


def sanitize_cell(value: str) -> str:
    """Tabs, line breaks and other control or bidirectional characters, escaped."""
    out: list[str] = []
    for char in value:
        if char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif is_control(char) or char in _BIDI:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _clusters(value: str) -> list[tuple[str, int]]:
    """Characters grouped as a terminal shows them: a base and the marks that join it."""
    clusters: list[tuple[str, int]] = []
    joined = False
    for char in value:
        width = _char_width(char)
        if clusters and ((width == 0 and char != _ZWJ) or joined or char == _ZWJ):
            text, cluster_width = clusters[-1]
            clusters[-1] = (text + char, cluster_width if joined else cluster_width + width)
            joined = char == _ZWJ
            continue
        clusters.append((char, width))
        joined = False
    return clusters


def _escape_cluster(text: str) -> str:
    return "".join(
        ch
        if " " <= ch <= "~"
        else (f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
        for ch in text
    )


def _normalized(value: str) -> str:
    out: list[str] = []
    for text, width in _clusters(sanitize_cell(value)):
        out.append(_escape_cluster(text) if width <= 0 or len(text) > 16 else text)
    return "".join(out)


def display_width(value: str) -> int:
    return sum(width for _, width in _clusters(value))


def bounded_cell(value: str, width: int) -> str:
    """`value` escaped and cut to `width` columns, ending in `...` when cut."""
    if width <= 0:
        return ""
    clean = _normalized(value)
    if display_width(clean) <= width:
        return clean
    if width <= 3:
        return "..."[:width]
    out: list[str] = []
    used = 0
    for text, cluster_width in _clusters(clean):
        if used + cluster_width > width - 3:
            break
        out.append(text)
        used += cluster_width
    return "".join(out) + "..."


def sanitize(value: str, width: int) -> str:
    """`[REDACTED]` for a credential-shaped value, else the value as a bounded cell."""
    raw = value.encode("utf-8", "surrogatepass")[:_MAX_INSPECTION_BYTES]
    inspected = raw.decode("utf-8", "replace")
    if any(shape.search(inspected) for shape in _CREDENTIAL_SHAPES):
        return "[REDACTED]"
    return bounded_cell(inspected, width)


def public_name(value: str) -> bool:
    """A DNS-1123 subdomain that is safe to print."""
    return not dns1123_subdomain_problems(value) and sanitize(value, 253) == value


def public_namespace(value: str) -> bool:
    return public_name(value) and not dns1123_label_problems(value)
