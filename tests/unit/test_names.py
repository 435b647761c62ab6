"""Kubernetes name rules as Go counts them: a length is bytes of UTF-8 (Go's `len`)."""

from __future__ import annotations

import pytest

from ome_routing.core.names import (
    dns1035_label_problems,
    dns1123_label_problems,
    dns1123_subdomain_problems,
    go_len,
    label_value_problems,
)


def test_go_len_counts_utf8_bytes() -> None:
    assert (go_len("abc"), go_len("é"), go_len("€"), go_len("🙂")) == (3, 2, 3, 4)


@pytest.mark.parametrize(
    ("check", "limit"),
    [
        (dns1123_label_problems, 63),
        (dns1035_label_problems, 63),
        (label_value_problems, 63),
        (dns1123_subdomain_problems, 253),
    ],
)
def test_a_name_under_the_limit_in_characters_but_over_it_in_bytes_is_too_long(
    check: object, limit: int
) -> None:
    """`é` * (limit // 2 + 1) has fewer characters than the limit and more bytes: Go's
    `len` reports it too long (besides the format problem)."""
    value = "é" * (limit // 2 + 1)
    assert len(value) <= limit < go_len(value)
    problems = check(value)  # type: ignore[operator]
    assert f"must be no more than {limit} characters" in problems


@pytest.mark.parametrize("limit", [63])
def test_an_ascii_name_at_the_limit_is_not_too_long(limit: int) -> None:
    assert dns1123_label_problems("a" * limit) == []
