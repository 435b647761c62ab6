"""The capacity poll's digest: OME's recipe, pinned to values worked out by hand.

Each pinned value is `sha256sum` of the payload written out by hand from the recipe
(compact Go JSON, keys in the recipe's order), not the output of the code under test.
"""

from __future__ import annotations

import dataclasses

import pytest

from ome_routing.core.digests import (
    capacity_digest_payload,
    capacity_policy_digest,
    go_json_string,
)
from ome_routing.core.durations import parse_duration
from ome_routing.core.pollrules import CapacityPolicy


def a_poll(
    *,
    path: str = "/capacity",
    method: str = "GET",
    samples: int = 4,
    quorum: int = 3,
    period: str = "10s",
    timeout: str = "3s",
    max_age: str = "40s",
    options: tuple[tuple[str, str], ...] = (),
) -> CapacityPolicy:
    return CapacityPolicy(
        path=path,
        method=method,
        format="Report",
        samples=samples,
        quorum=quorum,
        period=parse_duration(period),
        timeout=parse_duration(timeout),
        max_age=parse_duration(max_age),
        options=options,
    )


STEP_2 = a_poll()
CHART = a_poll(samples=10, quorum=2, max_age="30s")


def test_the_payload_is_compact_go_json_with_the_recipes_key_order() -> None:
    assert capacity_digest_payload(STEP_2) == (
        b'{"version":1,"path":"/capacity","method":"GET","format":"Report","options":null,'
        b'"periodNanoseconds":10000000000,"timeoutNanoseconds":3000000000,"samples":4,'
        b'"quorum":3,"maxAgeNanoseconds":40000000000}'
    )


@pytest.mark.parametrize(
    ("policy", "digest"),
    [
        pytest.param(
            STEP_2,
            "sha256:4682f56f368a20d3c796edb4b5471dcf97c5ce67b6aca5c5627e4c380d19451a",
            id="the guide's Step 2 poll",
        ),
        pytest.param(
            CHART,
            "sha256:239a2e078950efff850878ea7b78b5e202d27306fc1c5f7d4df6ea34f76fcc88",
            id="the chart's example poll",
        ),
        pytest.param(
            a_poll(
                path="/a<b>&c",
                method="POST",
                samples=1,
                quorum=1,
                period="1.5s",
                timeout="500ms",
                max_age="1.5s",
                options=(("b", "\u00e9"), ("a", "x")),
            ),
            "sha256:00a766447f3a3db46ff6d6d539ea470b01558863ad74ee66c63a8a01d7da141e",
            id="HTML characters escaped, options sorted by key, UTF-8 kept",
        ),
    ],
)
def test_the_digest_is_omes_for_the_same_poll(policy: CapacityPolicy, digest: str) -> None:
    assert capacity_policy_digest(policy) == digest


@pytest.mark.parametrize(
    "change",
    [
        {"path": "/cap"},
        {"method": "POST"},
        {"format": "Other"},
        {"options": (("k", "v"),)},
        {"samples": 5},
        {"quorum": 2},
        {"period": parse_duration("11s")},
        {"timeout": parse_duration("2s")},
        {"max_age": parse_duration("41s")},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_changed_setting_changes_the_digest(change: dict[str, object]) -> None:
    changed = dataclasses.replace(STEP_2, **change)  # type: ignore[arg-type]
    assert capacity_policy_digest(changed) != capacity_policy_digest(STEP_2)


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("<>&", '"\\u003c\\u003e\\u0026"'),
        ('"\\', '"\\"\\\\"'),
        ("\n\t\x01", '"\\n\\t\\u0001"'),
        ("/a/b", '"/a/b"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("\u00e9", '"\u00e9"'),
        ("\ud800", '"\ufffd"'),
    ],
    ids=[
        "html",
        "quote and backslash",
        "control",
        "slash",
        "line separators",
        "utf-8",
        "surrogate",
    ],
)
def test_strings_are_written_as_gos_encoder_writes_them(text: str, written: str) -> None:
    assert go_json_string(text) == written
