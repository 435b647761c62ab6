"""The README's figures are quoted from docs/performance.md, never restated apart.

docs/performance.md is the one page that gives each figure with its command and date.
Every number in the README's "How fast" table (its figure and value columns) must appear
there as written, so a figure changed on one page and not the other fails here.
"""

from __future__ import annotations

import re

from doc_checks import REPO_ROOT

README = REPO_ROOT / "README.md"
PERFORMANCE = REPO_ROOT / "docs" / "performance.md"
SECTION = "## How fast"
# a number as the pages write them: 1,005 / 0.041 / 2.42-2.45 / 2,008/992
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:[-/]\d[\d,]*(?:\.\d+)?)*")


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The cells of the body rows of the first table under `heading`."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not set(line) <= set("|- "):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # the header row


def numbers(text: str) -> list[str]:
    # links name files and anchors, not figures
    return _NUMBER.findall(re.sub(r"\]\([^)]*\)", "]", text))


def test_every_readme_figure_is_on_the_performance_page() -> None:
    rows = table_rows(README.read_text(encoding="utf-8"), SECTION)
    assert len(rows) >= 5, f"README.md: no table of figures under {SECTION!r}"
    performance = PERFORMANCE.read_text(encoding="utf-8")
    missing = [
        f"{number} (in {row[0]!r})"
        for row in rows
        for number in numbers(" ".join(row[:2]))
        if number not in performance
    ]
    assert not missing, (
        "README.md's figures that docs/performance.md does not give (quote the page, or "
        f"correct one of them): {missing}"
    )


def test_a_number_is_read_as_written() -> None:
    assert numbers("p99 1,005 ms, 2.42-2.45, 2,008/992 [a](bench/x2/README.md)") == [
        "99",
        "1,005",
        "2.42-2.45",
        "2,008/992",
    ]
