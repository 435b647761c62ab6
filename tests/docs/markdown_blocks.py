"""Markdown as the docs tests read it: pure functions from a document's text to what it holds.

- fenced blocks (``` or ~~~, at any indent) with their language and the `doc-test` marker
  comment on the line right before each;
- every `doc-test` marker comment, well formed or not, with its line;
- inline code spans (CommonMark: a run of n backticks up to the next run of exactly n, line
  ends read as spaces; `\\|` read as `|` in a table row, as GitHub's tables do);
- links: `[text](target "title")`, images, `<https://...>` autolinks and `[ref]: target`
  definitions, outside code;
- heading anchors by GitHub's rules (`github-slugger`): the heading's text, lowercased,
  without punctuation but `-` and `_`, each space a `-`; a repeated slug gets `-1`, `-2`...;
  and the `id`/`name` of HTML anchors.

It reads no file and imports nothing of the project. Not read: HTML blocks but comments and
anchors, indented code blocks, block quotes' fences.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
MARKER_KINDS = ("run", "run control-plane", "illustration")

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER_LIKE = re.compile(r"<!--\s*doc-test\b(?P<rest>.*?)-->")
_MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<kind>[^>]*?)\s*-->\s*$")
_ATX = re.compile(r"^ {0,3}(?P<level>#{1,6})(?:[ \t]+(?P<text>.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|>|\|)")
_DEFINITION = re.compile(r"^ {0,3}\[(?P<label>[^\]]+)\]:[ \t]*(?P<target><[^>]*>|\S+)")
_HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
_AUTOLINK = re.compile(r"<(?P<target>[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>")
_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


@dataclass(frozen=True)
class Marker:
    """A `<!-- doc-test: KIND -->` comment; `kind` is None when the comment is malformed."""

    line: int
    kind: str | None
    text: str

    @property
    def valid(self) -> bool:
        return self.kind in MARKER_KINDS


@dataclass(frozen=True)
class Fence:
    line: int  # the opening fence's line (1-based)
    language: str  # the info string's first word, lowercased ("" when none)
    body: str  # the content, each line ending in "\n", the fence's indent removed
    marker: Marker | None  # the marker on the line right before the fence

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES

    @property
    def body_line(self) -> int:
        return self.line + 1


@dataclass(frozen=True)
class CodeSpan:
    line: int
    text: str


@dataclass(frozen=True)
class Link:
    line: int
    target: str
    text: str


@dataclass(frozen=True)
class Document:
    lines: tuple[str, ...]
    fences: tuple[Fence, ...]
    markers: tuple[Marker, ...]
    spans: tuple[CodeSpan, ...]
    links: tuple[Link, ...]
    anchors: frozenset[str]


def parse(text: str) -> Document:
    lines = tuple(text.splitlines())
    fences, fenced = _fences(lines)
    markers = tuple(_markers(lines, fenced))
    by_line = {m.line: m for m in markers}
    fences = tuple(Fence(f.line, f.language, f.body, by_line.get(f.line - 1)) for f in fences)
    spans: list[CodeSpan] = []
    links: list[Link] = []
    headings: list[str] = []
    for first, chunk in _chunks(lines, fenced):
        heading = _heading(chunk)
        _scan_inline("\n".join(chunk), first, spans, links, table=chunk[0].lstrip().startswith("|"))
        if heading is not None:
            headings.append(heading)
        for offset, line in enumerate(chunk):
            definition = _DEFINITION.match(line)
            if definition and not definition.group("label").startswith("^"):
                target = definition.group("target").strip("<>")
                links.append(Link(first + offset, target, definition.group("label")))
    anchors = set(github_anchors(headings))
    for number, line in enumerate(lines, start=1):
        if number not in fenced:
            anchors.update(_HTML_ANCHOR.findall(line))
    return Document(lines, fences, markers, tuple(spans), tuple(links), frozenset(anchors))


def _fences(lines: tuple[str, ...]) -> tuple[list[Fence], set[int]]:
    """The fenced blocks, and every line number that belongs to one (fences included)."""
    fences: list[Fence] = []
    fenced: set[int] = set()
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        if not opening or (opening.group("fence")[0] == "`" and "`" in opening.group("info")):
            index += 1
            continue
        indent = len(opening.group("indent"))
        fence = opening.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = "".join(_dedent(line, indent) + "\n" for line in lines[index + 1 : end])
        info = opening.group("info").strip()
        language = info.split()[0].lower() if info else ""
        fences.append(Fence(index + 1, language, body, None))
        fenced.update(range(index + 1, end + 2))
        index = end + 1
    return fences, fenced


def _dedent(line: str, indent: int) -> str:
    removable = len(line) - len(line.lstrip(" \t"))
    return line[min(indent, removable) :]


def _markers(lines: tuple[str, ...], fenced: set[int]) -> list[Marker]:
    found = []
    for number, line in enumerate(lines, start=1):
        if number in fenced or not _MARKER_LIKE.search(line):
            continue
        exact = _MARKER.match(line)
        found.append(Marker(number, exact.group("kind") if exact else None, line.strip()))
    return found


def _chunks(lines: tuple[str, ...], fenced: set[int]) -> list[tuple[int, list[str]]]:
    """Runs of text lines that an inline element may span: paragraphs, one heading, one row."""
    chunks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    first = 0
    for number, line in enumerate(lines, start=1):
        if number in fenced or not line.strip():
            if current:
                chunks.append((first, current))
            current = []
            continue
        if _SETEXT.match(line) and current and not _BLOCK_START.match(current[0]):
            level = "#" if line.strip().startswith("=") else "##"
            chunks.append((first, [f"{level} {' '.join(s.strip() for s in current)}"]))
            current = []
            continue
        single = bool(_ATX.match(line)) or line.lstrip().startswith("|")
        if current and (single or _BLOCK_START.match(line)):
            chunks.append((first, current))
            current = []
        if not current:
            first = number
        current.append(line)
        if single:
            chunks.append((first, current))
            current = []
    if current:
        chunks.append((first, current))
    return chunks


def _heading(chunk: list[str]) -> str | None:
    if len(chunk) != 1:
        return None
    atx = _ATX.match(chunk[0])
    return None if atx is None else (atx.group("text") or "")


def _scan_inline(
    text: str, first_line: int, spans: list[CodeSpan], links: list[Link], *, table: bool
) -> None:
    """Code spans and links of one chunk, in order; a link's text is scanned too."""

    def line_of(position: int) -> int:
        return first_line + text.count("\n", 0, position)

    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in _PUNCTUATION:
            index += 2
        elif text.startswith("<!--", index):
            end = text.find("-->", index + 4)
            index = len(text) if end < 0 else end + 3
        elif char == "`":
            run = _backticks(text, index)
            closing = re.compile(rf"(?<!`)`{{{run}}}(?!`)").search(text, index + run)
            if closing is None:
                index += run
                continue
            spans.append(
                CodeSpan(line_of(index), _span_text(text[index + run : closing.start()], table))
            )
            index = closing.end()
        elif char == "<" and (auto := _AUTOLINK.match(text, index)):
            links.append(Link(line_of(index), auto.group("target"), auto.group("target")))
            index = auto.end()
        elif char == "[":
            link = _inline_link(text, index)
            if link is None:
                index += 1
                continue
            label_end, target, end = link
            links.append(Link(line_of(index), target, text[index + 1 : label_end]))
            _scan_inline(text[index + 1 : label_end], line_of(index), spans, links, table=table)
            index = end
        else:
            index += 1


def _backticks(text: str, index: int) -> int:
    end = index
    while end < len(text) and text[end] == "`":
        end += 1
    return end - index


def _span_text(raw: str, table: bool) -> str:
    content = raw.replace("\n", " ")
    if table:
        content = content.replace("\\|", "|")
    if len(content) > 2 and content[0] == " " and content[-1] == " " and content.strip():
        content = content[1:-1]
    return content


def _inline_link(text: str, start: int) -> tuple[int, str, int] | None:
    """For `[label](target "title")` at `start`: (index of `]`, target, index after `)`)."""
    depth = 0
    index = start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "`":
            run = _backticks(text, index)
            closing = re.compile(rf"(?<!`)`{{{run}}}(?!`)").search(text, index + run)
            index = closing.end() if closing else index + run
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                break
        index += 1
    else:
        return None
    label_end = index
    if not text.startswith("(", label_end + 1):
        return None
    rest = text[label_end + 2 :]
    destination = re.match(r"[ \t\n]*(<[^>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*)", rest)
    assert destination is not None  # the pattern matches the empty string
    target = destination.group(1)
    after = destination.end()
    title = re.match(r"""[ \t\n]*(?:"[^"]*"|'[^']*'|\([^)]*\))?[ \t\n]*\)""", rest[after:])
    if title is None:
        return None
    if target.startswith("<"):
        target = target[1:-1]
    return label_end, target, label_end + 2 + after + title.end()


def heading_text(raw: str) -> str:
    """A heading's text as GitHub renders it: no markup, code spans' content kept."""
    text = re.sub(r"<[^>]+>", "", raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", text)
    parts = re.split(r"(`+)(.*?)\1", text)
    plain = []
    for index, part in enumerate(parts):
        if index % 3 == 2:  # a code span's content: kept as it is
            plain.append(part.strip() if part.strip() else part)
        elif index % 3 == 0:
            part = re.sub(r"(\*\*|__|\*|(?<!\w)_(?=\S)|(?<=\S)_(?!\w))", "", part)
            plain.append(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", part))
    return "".join(plain).strip()


def github_slug(text: str) -> str:
    """GitHub's slug of a heading's rendered text, before a repeat's `-N` suffix."""
    kept = (
        char
        for char in text.lower()
        if char.isalnum() or char in " -_" or unicodedata.category(char).startswith("M")
    )
    return "".join(kept).replace(" ", "-")


def github_anchors(headings: list[str]) -> list[str]:
    """The anchors of a document's headings (raw markdown text), in order, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = []
    for raw in headings:
        base = github_slug(heading_text(raw))
        slug = base
        while slug in seen:
            seen[base] += 1
            slug = f"{base}-{seen[base]}"
        seen[slug] = 0
        anchors.append(slug)
    return anchors
