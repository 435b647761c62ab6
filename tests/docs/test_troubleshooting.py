"""docs/troubleshooting.md names every reason and outcome the code can write.

The reasons are read from the modules that write them (not copied here), so a new
fallback reason, condition reason, publication reason, poll outcome, probe result or
`kubectl ome` fallback code without its row on the page fails this test. Each must
appear in inline code on the page: an exact reason as `` `reason` ``, a reason that
continues with an error as `` `prefix `` (the page then says what follows).
"""

from __future__ import annotations

from enum import StrEnum

import pytest
from doc_checks import REPO_ROOT

from ome_routing.core import capacity, conditions, probes, publication_status, report
from ome_routing.core.durations import parse_duration
from ome_routing.kubectl.fallback import FallbackCode
from ome_routing.observer import failures

PAGE = REPO_ROOT / "docs" / "troubleshooting.md"


def _constants(module: object, *, suffix: str = "") -> list[str]:
    """The module's upper-case string constants (those ending with `suffix`)."""
    return [
        value
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, str) and value.endswith(suffix)
    ]


def fallback_reasons() -> list[str]:
    """Every `capacity.fallbackReason` the controller writes: exact texts and prefixes."""
    return [
        *_constants(failures),  # the poll's failures, each a prefix before the error
        report.INVALID_PREFIX,
        report.NO_SERVABLE,
        report.NO_OBSERVED_AT,
        report.FUTURE,
        report.negative_reason(-1),
        report.stale_reason(parse_duration("40s")),
        capacity.NO_REPORT_YET,
        capacity.awaiting_quorum_reason(1, 3),
        capacity.expired_reason(2, 3),
    ]


def probe_messages() -> list[str]:
    return _constants(probes, suffix=": ")


ENUMS: list[type[StrEnum]] = [
    conditions.RoutableReason,
    conditions.OverrideReason,
    conditions.FallbackReason,
    publication_status.Reason,
    failures.Outcome,
    probes.ProbeResult,
    FallbackCode,
]


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _missing_prefixes(texts: list[str], page: str) -> list[str]:
    return [text for text in texts if f"`{text}" not in page]


def test_every_fallback_reason_has_a_row(page: str) -> None:
    missing = _missing_prefixes(fallback_reasons(), page)
    assert not missing, f"docs/troubleshooting.md does not name these fallbackReasons: {missing}"


def test_every_probe_message_is_named(page: str) -> None:
    missing = _missing_prefixes(probe_messages(), page)
    assert not missing, f"docs/troubleshooting.md does not name these probe messages: {missing}"


@pytest.mark.parametrize("enum", ENUMS, ids=[enum.__name__ for enum in ENUMS])
def test_every_value_has_a_row(enum: type[StrEnum], page: str) -> None:
    missing = [member.value for member in enum if f"`{member.value}`" not in page]
    assert not missing, f"docs/troubleshooting.md does not name these {enum.__name__}: {missing}"


def test_the_reason_sources_are_not_empty() -> None:
    """A refactor that moves the constants must not make the checks above vacuous."""
    assert len(_constants(failures)) >= 8
    assert len(probe_messages()) >= 3
