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


class TestParse:
    def test_the_documented_annotation_holds_one_drain(self) -> None:
        assert dict(parse_drains(DOCS_EXAMPLE)) == {
            "maintenance-a": Drain(cluster="worker-a", reason="planned maintenance")
        }

    @pytest.mark.parametrize("text", [None, "", "{}"])
    def test_an_absent_or_empty_annotation_is_no_drains(self, text: str | None) -> None:
        assert dict(parse_drains(text)) == {}

    def test_several_drains_may_hold_the_same_cluster(self) -> None:
        drains = parse_drains(
            annotation(b_drain=("worker-a", "disk swap"), a_drain=("worker-a", "kernel"))
        )
        assert list(drains) == ["a-drain", "b-drain"]
        assert {d.cluster for d in drains.values()} == {"worker-a"}

    def test_a_cluster_may_be_a_dns_subdomain(self) -> None:
        drains = parse_drains(annotation(x=("pool-1.eu-west.example", "move")))
        assert drains["x"].cluster == "pool-1.eu-west.example"

    @pytest.mark.parametrize(
        ("text", "detail"),
        [
            ("{", "invalid JSON: Expecting property name enclosed in double quotes"),
            (" ", "invalid JSON: Expecting value at line 1 column 2"),
            ("[]", "expected a JSON object keyed by drain ID, got array"),
            ('"x"', "expected a JSON object keyed by drain ID, got string"),
            ("null", "expected a JSON object keyed by drain ID, got null"),
            ('{"a":NaN}', "invalid JSON: NaN is not a JSON value"),
            (
                '{"a":{"cluster":"w","reason":"r"},"a":{"cluster":"v","reason":"r"}}',
                'duplicate key "a"',
            ),
            (
                '{"Maint_A":{"cluster":"w","reason":"r"}}',
                'drain ID "Maint_A" must be a DNS-1123 label',
            ),
            ('{"-a":{"cluster":"w","reason":"r"}}', 'drain ID "-a" must be a DNS-1123 label'),
            (
                '{"a":"worker-a"}',
                'drain "a": expected an object with "cluster" and "reason", got string',
            ),
            ('{"a":{"reason":"r"}}', 'drain "a": missing "cluster"'),
            ('{"a":{"cluster":"w"}}', 'drain "a": missing "reason"'),
            ('{"a":{"cluster":"w","reason":"r","until":"x"}}', 'drain "a": unknown field "until"'),
            (
                '{"a":{"cluster":7,"reason":"r"}}',
                'drain "a": "cluster" must be a string, got number',
            ),
            (
                '{"a":{"cluster":"Worker_A","reason":"r"}}',
                'drain "a": cluster "Worker_A" must be a DNS-1123 subdomain',
            ),
            ('{"a":{"cluster":"w","reason":""}}', 'drain "a": reason must not be empty'),
            (
                '{"a":{"cluster":"w","reason":" r"}}',
                'drain "a": reason " r" must not start or end with spaces',
            ),
            (
                '{"a":{"cluster":"w","reason":"a\\nb"}}',
                'drain "a": reason "a\\nb" holds a line break',
            ),
            (
                '{"a":{"cluster":"w","reason":"a\\u200bb"}}',
                "holds a line break, control or invisible character",
            ),
        ],
    )
    def test_a_malformed_annotation_is_an_error_never_no_drains(
        self, text: str, detail: str
    ) -> None:
        with pytest.raises(DrainAnnotationError) as caught:
            parse_drains(text)
        message = str(caught.value)
        assert message.startswith("parse ome.io/traffic-drain: ")
        assert detail in message

    def test_a_reason_over_256_bytes_is_refused(self) -> None:
        with pytest.raises(DrainAnnotationError, match="reason is 257 bytes"):
            parse_drains(annotation(a=("w", "x" * 257)))
        assert parse_drains(annotation(a=("w", "x" * 256)))["a"].reason == "x" * 256

    def test_more_than_64_drains_are_refused(self) -> None:
        many = {f"d{i}": ("w", "r") for i in range(MAX_DRAINS + 1)}
        with pytest.raises(DrainAnnotationError, match="holds 65 drains"):
            parse_drains(annotation(**many))

    def test_a_value_over_32_kib_is_refused_before_parsing(self) -> None:
        with pytest.raises(DrainAnnotationError, match="more than the limit of 32768"):
            parse_drains("{" + " " * 40000 + "}")


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

    @pytest.mark.parametrize("text", [None, "", DOCS_EXAMPLE])
    def test_removing_an_unknown_id_is_refused(self, text: str | None) -> None:
        with pytest.raises(DrainRefused) as caught:
            remove_drain(text, "maintenance-b")
        assert str(caught.value) == DOES_NOT_EXIST

    def test_non_ascii_reasons_round_trip(self) -> None:
        value = add_drain(None, "a", "worker-a", "Wartung für Knoten 3")
        assert "Wartung für" in value
        assert parse_drains(value)["a"].reason == "Wartung für Knoten 3"
