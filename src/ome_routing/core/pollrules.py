"""The rules of a capacity poll block, written once for the chart and for a service.

A poll block is read into `PollFields`, where, as in OME, a zero value (an empty
string, 0, `0s`, an empty map) counts as unset and `path` is the switch: a block
without a path is off. Three pure checks then judge it, each returning the first
broken rule (OME reports one at a time) or None:

- `poll_problem`: OME's rules for an enabled poll in the chart's order (path, method,
  format, durations, samples and quorum, the maxAge span, the format registry, the
  format's own options rule). Its messages name `routing.capacity`; for a service's
  own block the caller puts `spec.` in front of the whole message, as OME does.
- `bounds_problem`: the chart's observer limits (`minPeriod`, `maxSamples`).
- `service_poll_problem`: OME's per-service rules for `spec.routing.capacity`, in
  OME's per-service order (format after the method, maxAge >= period before the span),
  with `disabled` and its own wording (`must not exceed samples (4)`).

The typed readers here name the field as the user spells it and show the value; they
guard the shapes that OME's typed structs would refuse before any rule runs.

Errors: `CapacityRuleError` (a `ValueError`): `stage` says whether the broken rule is
judged when the block is validated (`VALIDATE`) or when it is resolved against this
build and the chart (`RESOLVE`); `detail` is the message without any prefix.
`DurationSyntaxError`, one of them, is a duration whose text does not parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ome_routing.core.durations import SECOND, Duration, DurationError, parse_duration
from ome_routing.core.report import FORMAT_REPORT, REGISTERED_FORMATS

#: The methods a poll may use; HEAD is accepted, as OME does, though its empty body
#: fails every poll as "not a valid report".
METHODS: tuple[str, ...] = ("GET", "HEAD", "POST")
#: Where the chart keeps the poll and the observer limits, as users spell it.
CHART_CAPACITY_FIELD = "routing.capacity"
OBSERVER_FIELD = "routing.observer"
#: A service's own poll, as users spell it.
SERVICE_CAPACITY_FIELD = "spec.routing.capacity"
DEFAULT_MIN_PERIOD = Duration(SECOND)
ZERO = Duration(0)

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
#: The poll's duration fields: values key -> PollFields attribute.
POLL_DURATIONS: dict[str, str] = {"period": "period", "timeout": "timeout", "maxAge": "max_age"}
#: Formats that read no options (all of this build's formats).
_FORMATS_WITHOUT_OPTIONS = frozenset({FORMAT_REPORT})

DURATION_HINT = '(use forms like "30s", "5m")'


class RuleStage(StrEnum):
    """When a poll rule is judged, which decides the prefix of a per-service error."""

    VALIDATE = "validate"  # `validate routing policy:`, the block on its own
    RESOLVE = "resolve"  # `resolve capacity policy:`, against this build and the chart


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


@dataclass(frozen=True, slots=True)
class PollFields:
    """A poll block as written. A zero value counts as unset, as in OME; `path` is the switch."""

    path: str = ""
    method: str = ""
    format: str = ""
    options: tuple[tuple[str, str], ...] = ()
    samples: int = 0
    quorum: int = 0
    period: Duration = ZERO
    timeout: Duration = ZERO
    max_age: Duration = ZERO

    @property
    def enabled(self) -> bool:
        """An empty path turns the poll off, and its other fields are then not judged."""
        return self.path != ""

    @property
    def operational(self) -> bool:
        """Any field set, which `disabled: true` must not be combined with."""
        return self != PollFields()

    def policy(self) -> CapacityPolicy:
        """The poll to run; only for fields that passed the rules."""
        return CapacityPolicy(
            path=self.path,
            method=self.method,
            format=self.format,
            samples=self.samples,
            quorum=self.quorum,
            period=self.period,
            timeout=self.timeout,
            max_age=self.max_age,
            options=self.options,
        )


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


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES |= {"\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_q(text: str) -> str:
    """A string as Go's `%q` prints it: printable characters kept, others escaped."""
    out = ['"']
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char == " " or char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


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


def read_poll(block: Mapping[str, Any], field: str, *, strict_durations: bool = True) -> PollFields:
    """Read a poll block's fields by type; a null or missing field is unset.

    With `strict_durations` off, a duration that does not parse reads as unset: the
    chart reports those together, before any rule (see `core.config`).
    """

    def text(name: str) -> str:
        value = block.get(name)
        return "" if value is None else read_string(value, f"{field}.{name}")

    def count(name: str) -> int:
        value = block.get(name)
        return 0 if value is None else read_whole_number(value, f"{field}.{name}")

    durations: dict[str, Duration] = {}
    for key, attribute in POLL_DURATIONS.items():
        try:
            durations[attribute] = read_duration(block.get(key), f"{field}.{key}")
        except DurationSyntaxError:
            if strict_durations:
                raise
            durations[attribute] = ZERO
    return PollFields(
        path=text("path"),
        method=text("method"),
        format=text("format"),
        options=read_string_map(block.get("options"), f"{field}.options"),
        samples=count("samples"),
        quorum=count("quorum"),
        **durations,
    )


# --- the poll rules, in OME's orders --------------------------------------------------


def poll_problem(poll: PollFields, formats: Iterable[str] = REGISTERED_FORMATS) -> str | None:
    """The first rule an enabled poll breaks, in the chart's order; None when it has none.

    Messages name `routing.capacity`; a service's own block puts `spec.` in front.
    """
    f = CHART_CAPACITY_FIELD
    when = f"when {f}.path is set"
    if not poll.path.startswith("/"):
        return f"{f}.path {go_q(poll.path)} must begin with {go_q('/')}"
    if not poll.method:
        return f"{f}.method is required {when}"
    if not poll.format:
        return f"{f}.format is required {when}"
    if poll.method not in METHODS:
        return f"{f}.method {go_q(poll.method)} must be GET, HEAD, or POST"
    for name, value in (("period", poll.period), ("timeout", poll.timeout)):
        if value.nanoseconds <= 0:
            return f"{f}.{name} must be positive {when}"
    if poll.timeout >= poll.period:
        return f"{f}.timeout ({poll.timeout}) must be shorter than {f}.period ({poll.period})"
    for name, number in (
        ("maxAge", poll.max_age.nanoseconds),
        ("samples", poll.samples),
        ("quorum", poll.quorum),
    ):
        if number <= 0:
            return f"{f}.{name} must be positive {when}"
    if poll.quorum > poll.samples:
        return f"{f}.quorum ({poll.quorum}) must not exceed {f}.samples ({poll.samples})"
    if poll.quorum > 1 and poll.max_age.nanoseconds // poll.period.nanoseconds < poll.quorum:
        return (
            f"{f}.maxAge ({poll.max_age}) must span at least quorum ({poll.quorum}) "
            f"{f}.period intervals"
        )
    if poll.max_age < poll.period:
        return f"{f}.maxAge ({poll.max_age}) must be at least {f}.period ({poll.period})"
    available = tuple(formats)
    if poll.format not in available:
        return (
            f"{f}.format {go_q(poll.format)} is not registered in this build "
            f"(available: {go_list(available)})"
        )
    if poll.options and poll.format in _FORMATS_WITHOUT_OPTIONS:
        return f"{f}.options is not accepted for format {go_q(poll.format)}"
    return None


def bounds_problem(poll: PollFields, limits: ObserverLimits) -> str | None:
    """The first observer limit an enabled poll breaks; messages name `routing.capacity`."""
    f = CHART_CAPACITY_FIELD
    if poll.period < limits.min_period:
        return (
            f"{f}.period ({poll.period}) must be at least "
            f"{OBSERVER_FIELD}.minPeriod ({limits.min_period})"
        )
    if poll.samples > limits.max_samples:
        return (
            f"{f}.samples ({poll.samples}) must not exceed "
            f"{OBSERVER_FIELD}.maxSamples ({limits.max_samples})"
        )
    return None


def service_poll_problem(poll: PollFields, disabled: bool) -> str | None:
    """The first rule a service's `spec.routing.capacity` breaks, in OME's per-service order."""
    f = SERVICE_CAPACITY_FIELD
    if disabled:
        if poll.operational:
            return f"{f}.disabled must not be combined with capacity configuration fields"
        return None
    if not poll.path:
        return f"{f}.path is required"
    if not poll.path.startswith("/"):
        return f"{f}.path {go_q(poll.path)} must begin with {go_q('/')}"
    if not poll.method:
        return f"{f}.method is required"
    if poll.method not in METHODS:
        return f"{f}.method {go_q(poll.method)} must be GET, HEAD, or POST"
    if not poll.format:
        return f"{f}.format is required"
    if poll.period.nanoseconds <= 0:
        return f"{f}.period must be positive"
    if poll.timeout.nanoseconds <= 0:
        return f"{f}.timeout must be positive"
    if poll.timeout >= poll.period:
        return f"{f}.timeout ({poll.timeout}) must be shorter than period ({poll.period})"
    if poll.samples <= 0:
        return f"{f}.samples must be positive"
    if poll.quorum <= 0:
        return f"{f}.quorum must be positive"
    if poll.quorum > poll.samples:
        return f"{f}.quorum ({poll.quorum}) must not exceed samples ({poll.samples})"
    if poll.max_age.nanoseconds <= 0:
        return f"{f}.maxAge must be positive"
    if poll.max_age < poll.period:
        return f"{f}.maxAge ({poll.max_age}) must be at least period ({poll.period})"
    if poll.quorum > 1 and poll.max_age.nanoseconds // poll.period.nanoseconds < poll.quorum:
        return (
            f"{f}.maxAge ({poll.max_age}) must span at least quorum ({poll.quorum}) "
            "period intervals"
        )
    return None
