"""README.md and docs/ against the project: markers, links, commands, flags and metrics.

One test per check and file (id: the file's path); a failure lists every `file:line` at fault.
"""

from __future__ import annotations

import pytest
from doc_checks import (
    REPO_ROOT,
    Doc,
    command_problems,
    docs_of,
    exported_metrics,
    link_problems,
    marker_problems,
    metric_problems,
)
from doc_commands import CommandTree

DOCS = docs_of(REPO_ROOT)
each_doc = pytest.mark.parametrize("doc", DOCS, ids=[doc.label for doc in DOCS])


@pytest.fixture(scope="module")
def tree() -> CommandTree:
    return CommandTree.of_project()


@pytest.fixture(scope="module")
def exported() -> frozenset[str]:
    return exported_metrics()


def test_the_readme_is_among_the_docs() -> None:
    assert "README.md" in [doc.label for doc in DOCS]


@each_doc
def test_every_shell_block_has_exactly_one_valid_marker(doc: Doc) -> None:
    problems = marker_problems(doc)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@each_doc
def test_relative_links_and_anchors_resolve(doc: Doc) -> None:
    problems = link_problems(doc, REPO_ROOT)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@each_doc
def test_commands_and_flags_named_exist(doc: Doc, tree: CommandTree) -> None:
    problems = command_problems(doc, tree)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@each_doc
def test_metrics_named_are_exported(doc: Doc, exported: frozenset[str]) -> None:
    problems = metric_problems(doc, exported)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
