"""The rules of a capacity poll block, written once for the chart and for a service.

`parse_capacity` judges the rules intrinsic to a poll block, `check_capacity_bounds` the
rules that depend on this build (its formats) and on the chart's observer limits. Both
serve the chart's `routing.capacity` (see `core.config`) and a service's
`spec.routing.capacity` (see `core.policy`); only the field prefix, and how the caller
prefixes the message, differ. The typed readers here name the field as the user spells
it and show the value.

Errors: `CapacityRuleError` (a `ValueError`): `stage` says whether the broken rule is
intrinsic to the block (`VALIDATE`) or depends on this build or the chart (`RESOLVE`);
`detail` is the message without any prefix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ome_routing.core.durations import SECOND, Duration, DurationError, parse_duration
from ome_routing.core.report import FORMAT_REPORT, REGISTERED_FORMATS

METHODS: tuple[str, ...] = ("GET", "POST")
#: Where the chart keeps the observer limits, as users spell it.
OBSERVER_FIELD = "routing.observer"
DEFAULT_MIN_PERIOD = Duration(SECOND)

#: Every field of a poll block, in the order the spec's table lists them.
CAPACITY_FIELDS: tuple[str, ...] = (
    "path",
    "method",
    "format",
    "options",
    "samples",
    "quorum",
    "period",
    "timeout",
    "maxAge",
)
#: The fields an enabled poll must set; `options` alone may be left out.
REQUIRED_CAPACITY_FIELDS: tuple[str, ...] = tuple(f for f in CAPACITY_FIELDS if f != "options")
#: Formats that read no options (all of this build's formats).
_FORMATS_WITHOUT_OPTIONS = frozenset({FORMAT_REPORT})

_DURATION_HINT = '(use forms like "30s", "5m")'


class RuleStage(StrEnum):
    """When a poll rule is judged, which decides the prefix of a per-service error."""

    VALIDATE = "validate"  # intrinsic to the block
    RESOLVE = "resolve"  # depends on this build (format registry) or the chart (observer limits)


class CapacityRuleError(ValueError):
    """A poll block breaks a rule; `detail` names the field and the value, unprefixed."""

    def __init__(self, stage: RuleStage, detail: str) -> None:
        super().__init__(detail)
        self.stage = stage
        self.detail = detail


def invalid(detail: str) -> CapacityRuleError:
    """A rule intrinsic to the block is broken."""
    return CapacityRuleError(RuleStage.VALIDATE, detail)


def unresolved(detail: str) -> CapacityRuleError:
    """A rule that depends on this build or the chart is broken."""
    return CapacityRuleError(RuleStage.RESOLVE, detail)


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A complete, validated capacity poll: what to ask each home, how often, and how to judge."""

    path: str
    method: str
    format: str
    samples: int
    quorum: int
    period: Duration
    timeout: Duration
    max_age: Duration
    #: Format-specific settings, sorted by key; always empty for `Report`, which takes none.
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ObserverLimits:
    """Bounds on the work that polls and probes create, across all routed services.

    The defaults are the chart's. A limit left out of the values keeps its default; one
    set to 0 or null is an error when routing is enabled.
    """

    #: How many TrafficMaps are updated at once.
    max_concurrent_reconciles: int = 8
    #: How many poll and probe requests are underway at once; polls and probes share it.
    max_concurrent_requests: int = 16
    #: How many bytes are read from an answer; a longer report fails its poll.
    max_response_bytes: int = 65536
    #: The shortest `period` a poll or probe may set, so that no service floods its homes.
    min_period: Duration = DEFAULT_MIN_PERIOD
    #: The most readings a poll's `samples` may keep, which bounds memory per home.
    max_samples: int = 100


# --- showing values in messages ------------------------------------------------------


def show(value: object) -> str:
    """A value as a message quotes it: strings in double quotes, YAML scalars as written."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def go_list(items: Iterable[str]) -> str:
    """A list as Go's `%v` prints a slice of strings: `[Report]`, `[a b]`."""
    return "[" + " ".join(items) + "]"


# --- typed reads shared by the chart and per-service parsers ------------------------


def reject_unknown_fields(block: Mapping[str, Any], field: str, known: Iterable[str]) -> None:
    """A misspelled key must not pass silently: name it, and list the keys that exist."""
    known_list = list(known)
    for key in block:
        if key not in known_list:
            raise invalid(
                f"{field}.{key} is not a known field (known: {', '.join(known_list)})",
            )


def read_mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise invalid(f"{field} must be a mapping of fields, got {show(value)}")
    return value


def read_bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"{field} must be true or false, got {show(value)}")
    return value


def read_string(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise invalid(f"{field} must be a string, got {show(value)}")
    return value


def read_whole_number(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{field} must be a whole number, got {show(value)}")
    return value


def duration_text(value: object) -> str | None:
    """The text of a duration as written; a YAML number (`period: 10`) reads as its digits."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def read_duration(value: object, field: str) -> Duration:
    text = duration_text(value)
    if text is None:
        raise invalid(f'{field} must be a duration such as "10s", got {show(value)}')
    try:
        return parse_duration(text)
    except DurationError:
        raise invalid(f"{field}: {show(text)} is not a duration {_DURATION_HINT}") from None


# --- the poll rules, written once -----------------------------------------------------


def parse_capacity(block: Mapping[str, Any], field: str) -> CapacityPolicy:
    """Check a poll block's intrinsic rules and build the poll.

    `field` is the block's name as the user spells it (`routing.capacity` or
    `spec.routing.capacity`). The block holds only poll fields (no `disabled`); a field
    set to null counts as missing. Raises `CapacityRuleError` at `RuleStage.VALIDATE`.
    """
    reject_unknown_fields(block, field, CAPACITY_FIELDS)
    for name in REQUIRED_CAPACITY_FIELDS:
        if block.get(name) is None:
            if name == "path":
                raise invalid(f"{field}.path is required")
            raise invalid(f"{field}.{name} is required once {field}.path is set")

    path = read_string(block["path"], f"{field}.path")
    if not path.startswith("/"):
        raise invalid(f'{field}.path {show(path)} must start with "/"')

    method = read_string(block["method"], f"{field}.method")
    if method not in METHODS:
        raise invalid(f"{field}.method {show(method)} must be {' or '.join(METHODS)}")

    fmt = read_string(block["format"], f"{field}.format")
    if not fmt:
        raise invalid(f'{field}.format must name a format, such as "Report"')

    options = _read_options(block.get("options"), f"{field}.options")

    samples = read_whole_number(block["samples"], f"{field}.samples")
    if samples < 1:
        raise invalid(f"{field}.samples ({samples}) must be at least 1")
    quorum = read_whole_number(block["quorum"], f"{field}.quorum")
    if quorum < 1:
        raise invalid(f"{field}.quorum ({quorum}) must be at least 1")
    if quorum > samples:
        raise invalid(
            f"{field}.quorum ({quorum}) must not exceed {field}.samples ({samples})",
        )

    period = read_duration(block["period"], f"{field}.period")
    if period.nanoseconds <= 0:
        raise invalid(f"{field}.period ({period}) must be positive")
    timeout = read_duration(block["timeout"], f"{field}.timeout")
    if timeout.nanoseconds <= 0:
        raise invalid(f"{field}.timeout ({timeout}) must be positive")
    if timeout >= period:
        raise invalid(
            f"{field}.timeout ({timeout}) must be shorter than {field}.period ({period})",
        )
    max_age = read_duration(block["maxAge"], f"{field}.maxAge")
    if max_age.nanoseconds <= 0:
        raise invalid(f"{field}.maxAge ({max_age}) must be positive")
    if max_age < period * quorum:
        raise invalid(
            f"{field}.maxAge ({max_age}) must span at least quorum ({quorum}) period intervals",
        )
    return CapacityPolicy(
        path=path,
        method=method,
        format=fmt,
        samples=samples,
        quorum=quorum,
        period=period,
        timeout=timeout,
        max_age=max_age,
        options=options,
    )


def _read_options(value: object, field: str) -> tuple[tuple[str, str], ...]:
    """Options are a map of strings to strings; an empty or null map is no options."""
    if value is None:
        return ()
    block = read_mapping(value, field)
    pairs: list[tuple[str, str]] = []
    for key, option in block.items():
        name = read_string(key, f"{field} key {show(key)}")
        pairs.append((name, read_string(option, f"{field}[{show(name)}]")))
    return tuple(sorted(pairs))


def check_capacity_bounds(
    policy: CapacityPolicy,
    field: str,
    limits: ObserverLimits,
    formats: Iterable[str] = REGISTERED_FORMATS,
) -> None:
    """Check the rules that depend on this build (formats) and the chart (observer limits).

    Raises `CapacityRuleError` at `RuleStage.RESOLVE`.
    """
    available = tuple(formats)
    if policy.format not in available:
        raise unresolved(
            f"{field}.format {show(policy.format)} is not registered in this build "
            f"(available: {go_list(available)})",
        )
    if policy.options and policy.format in _FORMATS_WITHOUT_OPTIONS:
        raise unresolved(
            f"{field}.options {show(dict(policy.options))} must be left out: "
            f"format {policy.format} takes none",
        )
    if policy.period < limits.min_period:
        raise unresolved(
            f"{field}.period ({policy.period}) must be at least "
            f"{OBSERVER_FIELD}.minPeriod ({limits.min_period})",
        )
    if policy.samples > limits.max_samples:
        raise unresolved(
            f"{field}.samples ({policy.samples}) must not exceed "
            f"{OBSERVER_FIELD}.maxSamples ({limits.max_samples})",
        )
