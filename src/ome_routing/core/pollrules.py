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

The observer limits live here too: `load_observer` reads them as written (a limit left
out keeps the chart's default), `check_observer` requires each to be positive.

The typed readers and the error types are `core.fields`'s; the rules a poll shares with a
health probe (request, timing, `disabled`, `minPeriod`) are `core.blockrules`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ome_routing.core.blockrules import (
    OBSERVER_FIELD,
    chart_timing_problem,
    disabled_problem,
    method_problem,
    min_period_problem,
    not_positive,
    path_problem,
    service_request_problem,
    service_timing_problem,
    when_path_set,
)
from ome_routing.core.durations import SECOND, Duration, parse_duration
from ome_routing.core.fields import (
    ZERO,
    CapacityRuleError,
    RuleStage,
    block_count,
    block_durations,
    block_text,
    duration_text,
    go_list,
    go_q,
    invalid,
    read_mapping,
    read_string_map,
    read_whole_number,
)
from ome_routing.core.report import FORMAT_REPORT, REGISTERED_FORMATS

__all__ = [
    "CAPACITY_FIELDS",
    "CHART_CAPACITY_FIELD",
    "MISSING",
    "OBSERVER_FIELD",
    "SERVICE_CAPACITY_FIELD",
    "CapacityPolicy",
    "CapacityRuleError",
    "ObserverLimits",
    "PollFields",
    "RuleStage",
    "bounds_problem",
    "check_observer",
    "load_observer",
    "poll_problem",
    "read_poll",
    "service_poll_problem",
]

#: Where the chart keeps the poll, as users spell it (the observer limits: `OBSERVER_FIELD`).
CHART_CAPACITY_FIELD = "routing.capacity"
#: A service's own poll, as users spell it.
SERVICE_CAPACITY_FIELD = "spec.routing.capacity"
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
#: The poll's duration fields: values key -> PollFields attribute.
POLL_DURATIONS: dict[str, str] = {"period": "period", "timeout": "timeout", "maxAge": "max_age"}
#: Formats that read no options (all of this build's formats).
_FORMATS_WITHOUT_OPTIONS = frozenset({FORMAT_REPORT})


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


def read_poll(block: Mapping[str, Any], field: str, *, strict_durations: bool = True) -> PollFields:
    """Read a poll block's fields by type; a null or missing field is unset.

    With `strict_durations` off, a duration that does not parse reads as unset: the
    chart reports those together, before any rule (see `core.config`).
    """
    durations = block_durations(block, field, POLL_DURATIONS, strict=strict_durations)
    return PollFields(
        path=block_text(block, field, "path"),
        method=block_text(block, field, "method"),
        format=block_text(block, field, "format"),
        options=read_string_map(block.get("options"), f"{field}.options"),
        samples=block_count(block, field, "samples"),
        quorum=block_count(block, field, "quorum"),
        **durations,
    )


# --- the observer limits --------------------------------------------------------------

#: values key -> (ObserverLimits attribute, is a duration)
_OBSERVER_LIMITS: dict[str, tuple[str, bool]] = {
    "maxConcurrentReconciles": ("max_concurrent_reconciles", False),
    "maxConcurrentRequests": ("max_concurrent_requests", False),
    "maxResponseBytes": ("max_response_bytes", False),
    "minPeriod": ("min_period", True),
    "maxSamples": ("max_samples", False),
}
MISSING = object()


def load_observer(value: object) -> dict[str, int | str]:
    """The limits as written: a count, or `minPeriod`'s text; removed ones read as 0 or "".

    `MISSING` stands for a block left out of the values.

    A limit left out keeps the chart's default. An explicit null block removes all five,
    as Helm's null does.
    """
    defaults = ObserverLimits()
    block: Mapping[str, Any]
    if value is MISSING:
        block = {}
    elif value is None:
        block = dict.fromkeys(_OBSERVER_LIMITS)
    else:
        block = read_mapping(value, OBSERVER_FIELD)
    raw: dict[str, int | str] = {}
    for key, (attribute, is_duration) in _OBSERVER_LIMITS.items():
        name = f"{OBSERVER_FIELD}.{key}"
        if key not in block:
            default = getattr(defaults, attribute)
            raw[key] = str(default) if is_duration else int(default)
        elif is_duration:
            raw[key] = duration_text(block[key], name)
        else:
            raw[key] = 0 if block[key] is None else read_whole_number(block[key], name)
    return raw


def check_observer(raw: Mapping[str, int | str]) -> ObserverLimits:
    """Every limit must be positive while routing is enabled; the first that is not fails.

    `minPeriod`'s syntax must have been checked already; raises `CapacityRuleError`.
    """
    limits: dict[str, int | Duration] = {}
    for key, (attribute, is_duration) in _OBSERVER_LIMITS.items():
        value = raw[key]
        limit: int | Duration
        if is_duration:
            # Its syntax was checked with the other durations; "0s" was refused there.
            limit = parse_duration(str(value)) if value != "" else ZERO
            magnitude = limit.nanoseconds
        else:
            limit = magnitude = int(value)
        if magnitude <= 0:
            raise invalid(f"{OBSERVER_FIELD}.{key} must be positive when routing is enabled")
        limits[attribute] = limit
    return ObserverLimits(**limits)  # type: ignore[arg-type]


# --- the poll rules, in OME's orders --------------------------------------------------


def poll_problem(poll: PollFields, formats: Iterable[str] = REGISTERED_FORMATS) -> str | None:
    """The first rule an enabled poll breaks, in the chart's order; None when it has none.

    Messages name `routing.capacity`; a service's own block puts `spec.` in front.
    """
    f = CHART_CAPACITY_FIELD
    when = when_path_set(f)
    problem = path_problem(f, poll.path)
    if problem:
        return problem
    if not poll.method:
        return f"{f}.method is required {when}"
    if not poll.format:
        return f"{f}.format is required {when}"
    problem = method_problem(f, poll.method) or chart_timing_problem(f, poll.period, poll.timeout)
    if problem:
        return problem
    problem = not_positive(
        f,
        (("maxAge", poll.max_age.nanoseconds), ("samples", poll.samples), ("quorum", poll.quorum)),
        when,
    )
    if problem:
        return problem
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
    problem = min_period_problem(f, poll.period, limits.min_period)
    if problem:
        return problem
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
        return disabled_problem(f, poll.operational, "capacity")
    problem = service_request_problem(f, poll.path, poll.method)
    if problem:
        return problem
    if not poll.format:
        return f"{f}.format is required"
    problem = service_timing_problem(f, poll.period, poll.timeout)
    if problem:
        return problem
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
