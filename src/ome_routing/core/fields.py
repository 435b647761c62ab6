"""Typed reads of raw configuration values, and the errors they raise.

The chart's values and a service's `spec.routing` arrive as decoded YAML or JSON. The
readers here check a value's type and name the field as the user spells it
(`routing.capacity.samples`, `spec.routing.capacity.period`), showing the value; the
quoting helpers print values as OME's Go messages do (`%q`, `%v` of a list).

Errors: `CapacityRuleError` (a `ValueError`): `stage` says whether the broken rule is
judged when a block is validated (`VALIDATE`) or when it is resolved against this build
and the chart (`RESOLVE`); `detail` is the message without any prefix.
`DurationSyntaxError`, one of them, is a duration whose text does not parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from ome_routing.core.durations import Duration, DurationError, parse_duration
from ome_routing.core.quoting import quote

ZERO = Duration(0)
DURATION_HINT = '(use forms like "30s", "5m")'


class RuleStage(StrEnum):
    """When a poll rule is judged, which decides the prefix of a per-service error."""

    VALIDATE = "validate"  # `validate routing policy:`, the block on its own
    RESOLVE = "resolve"  # `resolve capacity policy:`, against this build and the chart
    RESOLVE_PROBE = "resolve-probe"  # `resolve probe policy:`, the probe against the chart


class CapacityRuleError(ValueError):
    """A poll block breaks a rule; `detail` names the field and the value, unprefixed."""

    def __init__(self, stage: RuleStage, detail: str) -> None:
        super().__init__(detail)
        self.stage = stage
        self.detail = detail


class DurationSyntaxError(CapacityRuleError):
    """A duration whose text does not parse (as opposed to a value of the wrong type)."""

    def __init__(self, detail: str) -> None:
        super().__init__(RuleStage.VALIDATE, detail)


def invalid(detail: str) -> CapacityRuleError:
    """A rule judged when the block is validated is broken."""
    return CapacityRuleError(RuleStage.VALIDATE, detail)


def unresolved(detail: str) -> CapacityRuleError:
    """A rule judged when the block is resolved against the build and the chart is broken."""
    return CapacityRuleError(RuleStage.RESOLVE, detail)


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


def go_q(text: str) -> str:
    """A string as Go's `%q` prints it: printable characters kept, others escaped."""
    return quote(text)


def go_list(items: Iterable[str]) -> str:
    """A list as Go's `%v` prints a slice of strings: `[Report]`, `[a b]`."""
    return "[" + " ".join(items) + "]"


# --- typed reads shared by the chart and per-service parsers ------------------------


def unknown_fields(block: Mapping[str, Any], known: Iterable[str]) -> list[str]:
    """The keys of `block` that are not among `known`, in the block's order."""
    known_set = set(known)
    return [str(key) for key in block if key not in known_set]


def reject_unknown_fields(block: Mapping[str, Any], field: str, known: Iterable[str]) -> None:
    """A misspelled key must not pass silently: name it, and list the keys that exist."""
    known_list = list(known)
    for key in unknown_fields(block, known_list):
        raise invalid(f"{field}.{key} is not a known field (known: {', '.join(known_list)})")


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


def duration_text(value: object, field: str) -> str:
    """The text of a duration as written: null is empty, a YAML number (`period: 10`) its digits."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise invalid(f'{field} must be a duration such as "10s", got {show(value)}')


def not_a_duration(field: str, text: str) -> str:
    return f"{field}: {go_q(text)} is not a duration {DURATION_HINT}"


def read_duration(value: object, field: str) -> Duration:
    """A duration; empty (or null) reads as 0s, text that is not a duration fails."""
    text = duration_text(value, field)
    if text == "":
        return ZERO
    try:
        return parse_duration(text)
    except DurationError:
        raise DurationSyntaxError(not_a_duration(field, text)) from None


def read_string_map(value: object, field: str) -> tuple[tuple[str, str], ...]:
    """A map of strings to strings, sorted by key; null or empty is no entries."""
    if value is None:
        return ()
    block = read_mapping(value, field)
    pairs: list[tuple[str, str]] = []
    for key, entry in block.items():
        name = read_string(key, f"{field} key {show(key)}")
        pairs.append((name, read_string(entry, f"{field}[{show(name)}]")))
    return tuple(sorted(pairs))


# --- the fields of a poll or probe block ---------------------------------------------
# a null or missing field is unset: its zero value, which the rules then judge


def block_text(block: Mapping[str, Any], field: str, name: str) -> str:
    """`block[name]` as a string, "" when null or missing; `field` is the block's name."""
    value = block.get(name)
    return "" if value is None else read_string(value, f"{field}.{name}")


def block_count(block: Mapping[str, Any], field: str, name: str) -> int:
    """`block[name]` as a whole number, 0 when null or missing."""
    value = block.get(name)
    return 0 if value is None else read_whole_number(value, f"{field}.{name}")


def block_durations(
    block: Mapping[str, Any], field: str, keys: Mapping[str, str], *, strict: bool
) -> dict[str, Duration]:
    """The durations `keys` names (values key -> attribute), by attribute; null or missing is 0s.

    With `strict` off, a duration that does not parse reads as unset: the chart reports
    those together, before any rule (see `core.config`).
    """
    durations: dict[str, Duration] = {}
    for key, attribute in keys.items():
        try:
            durations[attribute] = read_duration(block.get(key), f"{field}.{key}")
        except DurationSyntaxError:
            if strict:
                raise
            durations[attribute] = ZERO
    return durations
