"""The README stays a short entry point whose map reaches every page of docs/."""

from __future__ import annotations

from doc_checks import REPO_ROOT, docs_of

README_MAX_LINES = 200


def test_every_page_of_docs_is_linked_from_the_readme() -> None:
    readme = next(doc for doc in docs_of(REPO_ROOT) if doc.label == "README.md")
    linked = {link.target.split("#", 1)[0] for link in readme.document.links}
    pages = sorted(path.relative_to(REPO_ROOT).as_posix() for path in REPO_ROOT.glob("docs/*.md"))
    missing = [page for page in pages if page not in linked]
    assert not missing, f"README.md's documentation map does not link: {missing}"


def test_the_readme_stays_under_its_length() -> None:
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines (keep it under 200)"
