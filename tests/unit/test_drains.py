"""The ome.io/traffic-drain annotation: strict parsing, and adding or removing one drain."""

from __future__ import annotations

import json

import pytest

from ome_routing.core.drains import (
    ALREADY_EXISTS,
    DOES_NOT_EXIST,
    MAX_DRAINS,
    Drain,
    DrainAnnotationError,
    DrainArgumentError,
    DrainRefused,
    add_drain,
    format_drains,
    parse_drains,
    remove_drain,
)

DOCS_EXAMPLE = '{"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'


def annotation(**drains: tuple[str, str]) -> str:
    return json.dumps(
        {d.replace("_", "-"): {"cluster": c, "reason": r} for d, (c, r) in drains.items()}
    )


ONE = '{"cluster":"w","reason":"r"}'


class TestParse:
    def test_the_documented_annotation_holds_one_drain(self) -> None:
        assert dict(parse_drains(DOCS_EXAMPLE)) == {
            "maintenance-a": Drain(cluster="worker-a", reason="planned maintenance")
        }

    @pytest.mark.parametrize("text", [None, "{}", " { } "])
    def test_an_absent_annotation_or_an_empty_object_is_no_drains(self, text: str | None) -> None:
        assert dict(parse_drains(text)) == {}

    def test_drains_are_sorted_by_id_and_several_may_hold_the_same_cluster(self) -> None:
        drains = parse_drains(
            annotation(b_drain=("worker-a", "disk swap"), a_drain=("worker-a", "kernel"))
        )
        assert list(drains) == ["a-drain", "b-drain"]
        assert {d.cluster for d in drains.values()} == {"worker-a"}

    @pytest.mark.parametrize(
        ("drain_id", "cluster", "reason"),
        [
            ("Maint 1", "worker-a", "planned"),
            ("UPPER_case.id", "Worker_A", "r"),
            ("a" * 300, "pool-1.eu-west.example", "two\nlines\x01 and " + "x" * 5000),
            ("\u00e9t\u00e9", "\u5de5\u4f5c", "Wartung f\u00fcr Knoten 3"),
        ],
        ids=["space-in-id", "no-dns-rule", "no-length-or-character-rule", "non-ascii"],
    )
    def test_any_non_empty_trimmed_id_cluster_and_reason_is_accepted(
        self, drain_id: str, cluster: str, reason: str
    ) -> None:
        text = json.dumps({drain_id: {"cluster": cluster, "reason": reason}})
        assert parse_drains(text)[drain_id] == Drain(cluster, reason)

    def test_there_is_no_limit_on_the_number_of_drains(self) -> None:
        many = {f"d{i}": ("w", "r") for i in range(MAX_DRAINS * 4)}
        assert len(parse_drains(annotation(**many))) == MAX_DRAINS * 4

    def test_a_null_field_reads_as_empty(self) -> None:
        with pytest.raises(DrainAnnotationError) as caught:
            parse_drains('{"a":{"cluster":null,"reason":"r"}}')
        assert (
            str(caught.value)
            == 'parse ome.io/traffic-drain: override "a" cluster must be non-empty'
        )

    @pytest.mark.parametrize(
        ("text", "detail"),
        [
            ("", "decode top-level object: EOF"),
            (" \t\n", "decode top-level object: EOF"),
            ("x", "decode top-level object: invalid character 'x' looking for beginning of value"),
            ("[]", "top-level value must be a JSON object keyed by override ID"),
            ("null", "top-level value must be a JSON object keyed by override ID"),
            ('"x"', "top-level value must be a JSON object keyed by override ID"),
            (f'{{" ":{ONE}}}', "override ID must be non-empty"),
            (f'{{"a ":{ONE}}}', "override ID must not have leading or trailing whitespace"),
            (f'{{"a":{ONE},"a":{ONE}}}', 'duplicate override ID "a"'),
            ('{"a":"worker-a"}', 'override "a" must be a JSON object'),
            ('{"a":[]}', 'override "a" must be a JSON object'),
            (
                '{"a":{"cluster":"w","cluster":"v","reason":"r"}}',
                'override "a" has duplicate field "cluster"',
            ),
            (
                '{"a":{"cluster":7,"reason":"r"}}',
                'override "a" field "cluster" must be a string: '
                "json: cannot unmarshal number into Go value of type string",
            ),
            (
                '{"a":{"until":{},"reason":"r"}}',
                'override "a" field "until" must be a string: '
                "json: cannot unmarshal object into Go value of type string",
            ),
            (
                '{"a":{"cluster":"w","reason":"r","until":"x"}}',
                'override "a" has unknown field "until"',
            ),
            ('{"a":{"reason":"r"}}', 'override "a" cluster must be non-empty'),
            ('{"a":{"cluster":"w","reason":" "}}', 'override "a" reason must be non-empty'),
            (
                '{"a":{"cluster":" w","reason":"r"}}',
                'override "a" cluster must not have leading or trailing whitespace',
            ),
            (
                '{"a":{"cluster":"w","reason":"r\\n"}}',
                'override "a" reason must not have leading or trailing whitespace',
            ),
            (f'{{"a":{ONE}}} {{}}', "unexpected trailing JSON token {"),
            (f'{{"a":{ONE}}} 5', "unexpected trailing JSON token 5"),
            (
                f'{{"a":{ONE}}} x',
                "decode trailing data: invalid character 'x' looking for beginning of value",
            ),
            (
                f'{{"a":{ONE},}}',
                "decode override ID: invalid character '}' "
                "looking for beginning of object key string",
            ),
            ('{"a":', 'override "a": decode object: EOF'),
            ('{"a":{"cluster":"w"', 'override "a": close object: EOF'),
            (
                '{"a":{"cluster" "w"}}',
                'override "a" field "cluster" must be a string: expected colon after object key',
            ),
            (
                '{"a":{3:"w"}}',
                "override \"a\": decode field: invalid character '3'",
            ),
            (f'{{"a":{ONE}', "close top-level object: EOF"),
        ],
    )
    def test_a_malformed_annotation_is_an_error_never_no_drains(
        self, text: str, detail: str
    ) -> None:
        with pytest.raises(DrainAnnotationError) as caught:
            parse_drains(text)
        assert str(caught.value) == f"parse ome.io/traffic-drain: {detail}"

    @pytest.mark.parametrize(
        ("until", "detail"),
        [
            ("[1e999]", "json: cannot unmarshal array into Go value of type string"),
            (
                "[" * 2_000 + "]" * 2_000,
                "json: cannot unmarshal array into Go value of type string",
            ),
            ("[" * 10_001 + "]" * 10_001, "invalid character '[' exceeded max depth"),
        ],
    )
    def test_a_field_value_is_read_whole_as_gos_decoder_reads_it(
        self, until: str, detail: str
    ) -> None:
        """Syntax and Go's nesting limit first; a number in it is never converted."""
        with pytest.raises(DrainAnnotationError) as caught:
            parse_drains(f'{{"a":{{"until":{until},"cluster":"w","reason":"r"}}}}')
        assert str(caught.value) == (
            f'parse ome.io/traffic-drain: override "a" field "until" must be a string: {detail}'
        )

    def test_ids_and_fields_are_quoted_as_gos_percent_q(self) -> None:
        with pytest.raises(DrainAnnotationError) as caught:
            parse_drains(f'{{"a\\u0001":{ONE},"a\\u0001":{ONE}}}')
        assert str(caught.value) == 'parse ome.io/traffic-drain: duplicate override ID "a\\x01"'
        with pytest.raises(DrainAnnotationError) as caught:
            parse_drains('{"a":{"cluster":"w","reason":"r","\\u00a0":"x"}}')
        assert str(caught.value) == (
            'parse ome.io/traffic-drain: override "a" has unknown field "\\u00a0"'
        )

    def test_a_value_is_checked_before_the_field_name(self) -> None:
        with pytest.raises(DrainAnnotationError, match='field "until" must be a string'):
            parse_drains('{"a":{"until":7,"cluster":"w","reason":"r"}}')

    def test_whitespace_is_what_go_trims_not_what_python_strips(self) -> None:
        """U+001F is not white space to Go's strings.TrimSpace; U+00A0 is."""
        assert parse_drains('{"a":{"cluster":"w\\u001f","reason":"r"}}')["a"].cluster == "w\x1f"
        with pytest.raises(DrainAnnotationError, match="leading or trailing whitespace"):
            parse_drains('{"a":{"cluster":"w\\u00a0","reason":"r"}}')


class TestAddAndRemove:
    def test_adding_to_no_annotation_gives_the_documented_value(self) -> None:
        assert add_drain(None, "maintenance-a", "worker-a", "planned maintenance") == DOCS_EXAMPLE

    def test_adding_keeps_every_other_drain_and_sorts_by_id(self) -> None:
        value = add_drain(DOCS_EXAMPLE, "kernel-b", "worker-b", "kernel upgrade")
        assert value == (
            '{"kernel-b":{"cluster":"worker-b","reason":"kernel upgrade"},'
            '"maintenance-a":{"cluster":"worker-a","reason":"planned maintenance"}}'
        )
        assert set(parse_drains(value)) == {"kernel-b", "maintenance-a"}

    def test_adding_an_existing_id_is_refused(self) -> None:
        with pytest.raises(DrainRefused) as caught:
            add_drain(DOCS_EXAMPLE, "maintenance-a", "worker-b", "again")
        assert str(caught.value) == ALREADY_EXISTS

    def test_adding_to_a_malformed_annotation_is_refused(self) -> None:
        with pytest.raises(DrainAnnotationError):
            add_drain("{not json", "a", "worker-a", "r")

    @pytest.mark.parametrize(
        ("drain_id", "cluster", "reason", "detail"),
        [
            ("Bad_ID", "worker-a", "r", 'drain ID "Bad_ID" must be a DNS-1123 label'),
            ("a" * 64, "worker-a", "r", "must be a DNS-1123 label"),
            ("ok", "Worker-A", "r", 'cluster "Worker-A" must be a DNS-1123 subdomain'),
            ("ok", "worker-a", "", "reason must not be empty"),
            ("ok", "worker-a", "two\nlines", "holds a line break"),
        ],
    )
    def test_a_bad_id_cluster_or_reason_is_refused_naming_it(
        self, drain_id: str, cluster: str, reason: str, detail: str
    ) -> None:
        with pytest.raises(DrainArgumentError) as caught:
            add_drain(None, drain_id, cluster, reason)
        assert detail in str(caught.value)

    def test_adding_a_65th_drain_is_refused(self) -> None:
        full = format_drains({f"d{i}": Drain("w", "r") for i in range(MAX_DRAINS)})
        with pytest.raises(DrainArgumentError, match="limit is 64"):
            add_drain(full, "one-more", "w", "r")

    def test_removing_keeps_the_others_and_returns_the_removed_drain(self) -> None:
        both = add_drain(DOCS_EXAMPLE, "kernel-b", "worker-b", "kernel upgrade")
        value, removed = remove_drain(both, "kernel-b")
        assert value == DOCS_EXAMPLE
        assert removed == Drain("worker-b", "kernel upgrade")

    def test_removing_the_last_drain_removes_the_annotation(self) -> None:
        assert remove_drain(DOCS_EXAMPLE, "maintenance-a") == (
            None,
            Drain("worker-a", "planned maintenance"),
        )

    def test_an_empty_annotation_is_malformed_for_the_actions_too(self) -> None:
        with pytest.raises(DrainAnnotationError):
            add_drain("", "a", "worker-a", "r")
        with pytest.raises(DrainAnnotationError):
            remove_drain("", "a")

    @pytest.mark.parametrize("text", [None, DOCS_EXAMPLE])
    def test_removing_an_unknown_id_is_refused(self, text: str | None) -> None:
        with pytest.raises(DrainRefused) as caught:
            remove_drain(text, "maintenance-b")
        assert str(caught.value) == DOES_NOT_EXIST

    def test_non_ascii_reasons_round_trip(self) -> None:
        value = add_drain(None, "a", "worker-a", "Wartung für Knoten 3")
        assert "Wartung für" in value
        assert parse_drains(value)["a"].reason == "Wartung für Knoten 3"
