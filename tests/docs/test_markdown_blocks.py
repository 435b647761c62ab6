"""The Markdown reader of the docs tests: fences and markers, code spans, links, anchors."""

from __future__ import annotations

import pytest
from markdown_blocks import github_anchors, github_slug, heading_text, parse


class TestFences:
    def test_a_fence_has_its_language_line_body_and_the_marker_before_it(self) -> None:
        doc = parse("text\n<!-- doc-test: run -->\n```Bash title\necho hi\n\n  x\n```\n")
        (fence,) = doc.fences
        assert (fence.line, fence.language, fence.body) == (3, "bash", "echo hi\n\n  x\n")
        assert fence.marker is not None and fence.marker.kind == "run"
        assert fence.is_shell and fence.body_line == 4

    def test_a_marker_separated_by_a_blank_line_is_not_the_fences(self) -> None:
        (fence,) = parse("<!-- doc-test: run -->\n\n```sh\nls\n```\n").fences
        assert fence.marker is None

    @pytest.mark.parametrize("language", ["bash", "sh", "shell", "console"])
    def test_shell_languages(self, language: str) -> None:
        assert parse(f"```{language}\nx\n```\n").fences[0].is_shell

    @pytest.mark.parametrize("info", ["yaml", "text", "", "python"])
    def test_other_fences_are_not_shell(self, info: str) -> None:
        assert not parse(f"```{info}\nx\n```\n").fences[0].is_shell

    def test_tildes_longer_closers_and_a_shorter_fence_inside(self) -> None:
        doc = parse("~~~~bash\n~~~\nstill inside\n~~~~~\nafter\n")
        (fence,) = doc.fences
        assert fence.body == "~~~\nstill inside\n"

    def test_an_indented_fence_in_a_list_loses_its_indent(self) -> None:
        (fence,) = parse("- item:\n\n  ```bash\n  echo a\n    echo b\n  ```\n").fences
        assert fence.body == "echo a\n  echo b\n"

    def test_an_unclosed_fence_runs_to_the_end(self) -> None:
        (fence,) = parse("```bash\necho a\n# Not a heading\n").fences
        assert fence.body == "echo a\n# Not a heading\n"
        assert parse("```bash\n# h\n").anchors == frozenset()

    def test_markers_inside_a_fence_are_not_markers(self) -> None:
        doc = parse("```text\n<!-- doc-test: run -->\n```\n")
        assert doc.markers == ()


class TestMarkers:
    @pytest.mark.parametrize("kind", ["run", "run control-plane", "illustration"])
    def test_valid_kinds(self, kind: str) -> None:
        (marker,) = parse(f"<!--  doc-test:  {kind}  -->\n").markers
        assert marker.valid and marker.kind == kind

    @pytest.mark.parametrize(
        "line",
        [
            "<!-- doc-test: runn -->",
            "<!-- doc-test run -->",
            "<!-- doc-test: -->",
            "x <!-- doc-test: run -->",
        ],
    )
    def test_malformed_markers_are_found_and_not_valid(self, line: str) -> None:
        (marker,) = parse(f"{line}\n").markers
        assert not marker.valid


class TestCodeSpans:
    def test_spans_with_their_lines(self) -> None:
        doc = parse("a `x` b\nc ``y`z`` d\n\n`w`\n")
        assert [(s.line, s.text) for s in doc.spans] == [(1, "x"), (2, "y`z"), (4, "w")]

    def test_a_span_across_lines_reads_the_line_end_as_a_space(self) -> None:
        (span,) = parse("see `ome-routing demo\n--keep` here\n").spans
        assert (span.line, span.text) == (1, "ome-routing demo --keep")

    def test_a_span_does_not_cross_a_blank_line(self) -> None:
        assert parse("a `x\n\ny` b\n").spans == ()

    def test_an_escaped_backtick_opens_nothing(self) -> None:
        assert [s.text for s in parse("\\`a `b`\n").spans] == ["b"]

    def test_an_escaped_bar_in_a_table_row_is_a_bar(self) -> None:
        doc = parse("| `a\\|b` | c |\n| --- | --- |\n\n`d\\|e`\n")
        assert [s.text for s in doc.spans] == ["a|b", "d\\|e"]

    def test_one_surrounding_space_is_stripped(self) -> None:
        assert [s.text for s in parse("`` `x` ``\n").spans] == ["`x`"]


class TestLinks:
    def test_inline_links_images_titles_and_angle_targets(self) -> None:
        doc = parse('[a](x.md#h "t") ![i](img.png)\n[b](<with space.md>) [c](y(1).md)\n')
        assert [(link.line, link.target) for link in doc.links] == [
            (1, "x.md#h"),
            (1, "img.png"),
            (2, "with space.md"),
            (2, "y(1).md"),
        ]

    def test_autolinks_and_definitions(self) -> None:
        doc = parse("<https://e.com/a>\n\n[ref]: ./z.md#q\n")
        assert [link.target for link in doc.links] == ["https://e.com/a", "./z.md#q"]

    def test_no_links_in_code(self) -> None:
        doc = parse("`[a](x.md)`\n\n```md\n[b](y.md)\n```\n")
        assert doc.links == ()

    def test_a_code_span_inside_link_text_is_a_span(self) -> None:
        doc = parse("[`ome-routing demo`](#demo)\n")
        assert [s.text for s in doc.spans] == ["ome-routing demo"]
        assert [link.target for link in doc.links] == ["#demo"]

    def test_brackets_that_are_not_links(self) -> None:
        assert parse("[x] and [y][] and [z] (w)\n").links == ()


class TestAnchors:
    @pytest.mark.parametrize(
        ("heading", "slug"),
        [
            ("Quickstart", "quickstart"),
            ("Leader election and fencing", "leader-election-and-fencing"),
            ("`kubectl ome`", "kubectl-ome"),
            ("A & B: c/d (e)", "a--b-cd-e"),
            ("**Bold** _emph_ snake_case", "bold-emph-snake_case"),
            ("[Linked](x.md) text", "linked-text"),
            ("Über café", "über-café"),
            ("v1.34 -- ok?", "v134----ok"),
        ],
    )
    def test_github_slugs(self, heading: str, slug: str) -> None:
        assert github_slug(heading_text(heading)) == slug

    def test_repeated_headings_are_numbered(self) -> None:
        assert github_anchors(["A", "A", "A-1", "A"]) == ["a", "a-1", "a-1-1", "a-2"]

    def test_atx_setext_closing_hashes_and_html_anchors(self) -> None:
        doc = parse('# One #\n\nTwo\n===\n\nThree\n---\n\n<a id="custom"></a>\n#nohash\n')
        assert doc.anchors == frozenset({"one", "two", "three", "custom"})

    def test_a_thematic_break_after_a_blank_line_is_no_heading(self) -> None:
        assert parse("text\n\n---\n").anchors == frozenset()
