"""`ome-routing simulate`: replay a trace of polls through one home's capacity window.

A tuning aid: it answers "with these `samples`, `quorum` and `maxAge`, what would the
home's ceiling and fallback reason (and, given `--admitted`, its `capacity.allocated`)
have been after each poll?" It runs the controller's own window, report parser and
allocation, with the trace's `at` times as the clock; it does no I/O besides reading
the trace and printing. Once the trace is read, it prints the poll's convergence
bounds (`core.convergence`) on stderr, where they stay out of the JSON lines.

The trace is JSON lines, one poll each, in time order (blank lines are skipped):

    {"at": "2026-09-28T10:00:00Z", "servable": 4, "observedAt": "2026-09-28T10:00:00Z"}
    {"at": "2026-09-28T10:00:10Z", "error": "capacity endpoint returned HTTP 404"}

A poll line with `servable` or `observedAt` is handed, as it stands, to the report
parser (which ignores `at`), so a negative count, a missing field or a stamp without a
time zone fails the poll as it would in production. `error` is a failed poll's reason.

`--period` does not drive the replay (the trace's times do). It is checked as the
controller checks it (`maxAge` must span `quorum` periods), and a gap between two
polls longer than `period` gets a warning on stderr: the controller would have polled
in between, so the trace leaves out polls that would have counted.

With `--max-increase-per-period F` (a ramp, ours: `core.ramps`), each line also carries the
home's ramped weight beside its target, against `--others` steady replicas
(`cli.simulate_ramp`).

Errors: bad options are click usage errors naming the option and value; a bad trace
line is a `TraceError` naming the line number and the problem, shown as a click error.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

import click

from ome_routing.cli import simulate_shadow
from ome_routing.cli.params import DurationParam
from ome_routing.cli.simulate_ramp import ramp_fields
from ome_routing.core.allocation import Allocation, allocate
from ome_routing.core.capacity import (
    Verdict,
    WindowSettings,
    empty_window,
    record_failure,
    record_reading,
    verdict,
)
from ome_routing.core.convergence import bounds, describe
from ome_routing.core.durations import Duration, go_quote
from ome_routing.core.ramps import MaxIncrease, RampSettingError, parse_max_increase
from ome_routing.core.report import ReportError, format_rfc3339, parse_report, parse_rfc3339

_DEFAULT_MIN_PERIOD = Duration.parse("1s")  # the chart's routing.observer.minPeriod
_DEFAULT_MAX_SAMPLES = 100  # the chart's routing.observer.maxSamples
_REPORT_FIELDS = ("servable", "observedAt")
_KNOWN_FIELDS = frozenset({"at", "error", *_REPORT_FIELDS})


class _Number(str):
    """A number in a trace line, unread."""


class TraceError(ValueError):
    """A trace line that is not a poll; the message names the line and the problem."""


@dataclass(frozen=True, slots=True)
class Poll:
    """One trace line: when the poll ended, and its body or its failure reason."""

    line: int
    at: datetime
    body: bytes | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Step:
    """The home after one poll; its allocation only when the admitted replicas are known."""

    at: datetime
    verdict: Verdict
    allocation: Allocation | None = None
    routable: int | None = None


def parse_trace_line(line_number: int, raw: bytes) -> Poll | None:
    """One trace line as a poll; None for a blank line."""
    if not raw.strip():
        return None

    def fail(problem: str) -> TraceError:
        return TraceError(f"line {line_number}: {problem}")

    try:
        # numbers stay text here: only the report parser judges them, as in production
        document: Any = json.loads(
            raw.decode("utf-8"), parse_int=_Number, parse_float=_Number, parse_constant=_Number
        )
    except UnicodeDecodeError:
        raise fail("not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise fail(f"not JSON: {err.msg} at column {err.colno}") from None
    except (ValueError, RecursionError) as err:
        raise fail(f"not JSON: {err}") from None
    if not isinstance(document, dict):
        raise fail("a poll must be a JSON object")
    unknown = sorted(set(document) - _KNOWN_FIELDS)
    if unknown:
        known = ", ".join(sorted(_KNOWN_FIELDS))
        raise fail(f"unknown field {go_quote(unknown[0])} (known: {known})")
    at_text = document.get("at")
    if not isinstance(at_text, str) or isinstance(at_text, _Number):
        raise fail('"at" is required, as an RFC 3339 time with a time zone')
    try:
        at = parse_rfc3339(at_text)
    except ValueError as err:
        raise fail(f'"at": {err}') from None
    has_report = any(field in document for field in _REPORT_FIELDS)
    if "error" in document:
        error = document["error"]
        if has_report:
            raise fail('a poll has either "error" or "servable" and "observedAt", not both')
        if not isinstance(error, str) or isinstance(error, _Number) or not error:
            raise fail('"error" must be a non-empty string, the failed poll\'s reason')
        return Poll(line_number, at, None, error)
    if not has_report:
        raise fail('a poll needs "servable" and "observedAt", or "error"')
    return Poll(line_number, at, raw, None)


def read_trace(lines: Iterable[bytes]) -> list[Poll]:
    """Every poll of a trace, checked to be in time order."""
    polls: list[Poll] = []
    for number, raw in enumerate(lines, start=1):
        poll = parse_trace_line(number, raw)
        if poll is None:
            continue
        if polls and poll.at <= polls[-1].at:
            raise TraceError(
                f"line {number}: {go_quote(format_rfc3339(poll.at))} is not after the "
                f"previous poll at {go_quote(format_rfc3339(polls[-1].at))}"
            )
        polls.append(poll)
    return polls


def simulate_polls(
    polls: Iterable[Poll],
    settings: WindowSettings,
    admitted: int | None = None,
    ready: int | None = None,
) -> Iterator[Step]:
    """Replay the polls through a window that starts empty, as after a reset.

    Without `admitted`, each step is the window's verdict alone; `ready` defaults to
    `admitted`.
    """
    window = empty_window(settings)
    for poll in polls:
        if poll.body is None:
            window = record_failure(window, poll.error or "")
        else:
            try:
                reading = parse_report(poll.body)
            except ReportError as err:
                window = record_failure(window, err.reason)
            else:
                window = record_reading(window, reading, poll.at)
        result = verdict(window, poll.at)
        if admitted is None:
            yield Step(poll.at, result)
            continue
        allocation = allocate(admitted, result.ceiling)
        routable = min(allocation.allocated, admitted if ready is None else ready)
        yield Step(poll.at, result, allocation, routable)


def gap_warnings(polls: list[Poll], period: Duration) -> list[str]:
    """A warning for each gap between polls that is longer than `period`."""
    limit = period.ceil_timedelta()
    warnings = []
    for previous, poll in itertools.pairwise(polls):
        gap = poll.at - previous.at
        if gap > limit:
            shown = Duration((gap // limit.resolution) * 1000)
            warnings.append(
                f"line {poll.line}: {shown} since the previous poll, longer than "
                f"--period ({period}): the controller would have polled in between"
            )
    return warnings


def format_step(step: Step, extra: Mapping[str, object] | None = None) -> str:
    """One output line: JSON, the TrafficMap entry's field names (then `extra`'s)."""
    line: dict[str, object] = {
        "at": format_rfc3339(step.at),
        "ceiling": step.verdict.ceiling,
        "fallbackReason": step.verdict.fallback_reason,
    }
    if step.allocation is not None:
        line["allocated"] = step.allocation.allocated
        line["source"] = str(step.allocation.source)
        line["reported"] = step.allocation.reported
        line["routable"] = step.routable
    line.update(extra or {})
    return json.dumps(line)


def settings_problems(
    samples: int, quorum: int, period: Duration, max_age: Duration
) -> tuple[list[str], list[str]]:
    """(errors, warnings) for the options, in the controller's wording where it has one."""
    errors: list[str] = []
    warnings: list[str] = []
    if quorum > samples:
        errors.append(f"--quorum ({quorum}) must not exceed --samples ({samples})")
    if period.nanoseconds <= 0:
        errors.append(f"--period ({period}) must be positive")
    if max_age.nanoseconds <= 0:
        errors.append(f"--max-age ({max_age}) must be positive")
    if not errors and max_age < period * quorum:
        errors.append(
            f"--max-age ({max_age}) must span at least --quorum ({quorum}) --period intervals"
            f" ({period * quorum}); the controller refuses this poll"
        )
    if period < _DEFAULT_MIN_PERIOD:
        warnings.append(
            f"--period ({period}) is under the chart's default routing.observer.minPeriod "
            f"({_DEFAULT_MIN_PERIOD})"
        )
    if samples > _DEFAULT_MAX_SAMPLES:
        warnings.append(
            f"--samples ({samples}) exceeds the chart's default routing.observer.maxSamples "
            f"({_DEFAULT_MAX_SAMPLES})"
        )
    return errors, warnings


DURATION = DurationParam()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("trace", type=click.File("rb"), metavar="TRACE")
@click.option(
    "--samples",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Readings kept for the home.",
)
@click.option(
    "--quorum",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Which reading, from the lowest, sets the ceiling.",
)
@click.option(
    "--period",
    type=DURATION,
    default="10s",
    show_default=True,
    help="The poll period: checked against --max-age, and against the trace's gaps.",
)
@click.option(
    "--max-age",
    "max_age",
    type=DURATION,
    default="30s",
    show_default=True,
    help="How long a reading counts, from its observedAt.",
)
@click.option(
    "--admitted",
    type=click.IntRange(min=0),
    default=None,
    help="The home's admitted replicas; without it, lines carry the window's verdict alone.",
)
@click.option(
    "--ready",
    type=click.IntRange(min=0),
    default=None,
    help="The home's ready replicas, with --admitted; defaults to --admitted.",
)
@click.option(
    "--shadow",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="A shadow routing policy (YAML or JSON shaped like spec.routing) judged on the "
    "same readings: each line also carries its fields (shadow) and whether they differ.",
)
@click.option(
    "--max-increase-per-period",
    "max_increase",
    default=None,
    help="A ramp (ours): the home's weight rises by at most this fraction (0, 1] of its "
    "capacity per --period; prints weight and periodsLeft beside targetWeight. Needs --admitted.",
)
@click.option(
    "--others",
    type=click.IntRange(min=0),
    default=None,
    help="With --max-increase-per-period: the routable replicas of the service's other "
    "homes, held steady; defaults to --admitted.",
)
def simulate(
    trace: IO[bytes],
    samples: int,
    quorum: int,
    period: Duration,
    max_age: Duration,
    admitted: int | None,
    ready: int | None,
    shadow: IO[str] | None = None,
    max_increase: str | None = None,
    others: int | None = None,
) -> None:
    """Replay a trace of capacity polls through one home's sample window.

    TRACE is a file of JSON lines ("-" for stdin), one poll each, in time order:
    {"at": RFC3339, "servable": N, "observedAt": RFC3339}, or {"at": RFC3339,
    "error": "<failure reason>"}. Prints one JSON line per poll: at, ceiling and
    fallbackReason; with --admitted, also allocated, source, reported, and routable
    (the lower of allocated and --ready, which the weight counts). The poll's
    convergence bounds go to stderr. With --shadow, each line also carries the shadow
    policy's fields (shadow) and whether they differ (differs), and a summary goes to
    stderr. With --max-increase-per-period (ours), also targetWeight, weight,
    othersTargetWeight, othersWeight and periodsLeft: the ramped weights beside the
    targets. The two options replay one trace each: they are not combined.
    """
    errors, warnings = settings_problems(samples, quorum, period, max_age)
    if ready is not None and admitted is None:
        errors.append(f"--ready ({ready}) needs --admitted")
    ramp = ramp_option(max_increase, others, admitted, errors)
    if shadow is not None and max_increase is not None:
        errors.append("--shadow and --max-increase-per-period replay one trace each: use one")
    if errors:
        raise click.UsageError("; ".join(errors))
    shadow_poll = simulate_shadow.load(shadow) if shadow is not None else None
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    try:
        polls = read_trace(trace)
    except TraceError as err:
        raise click.ClickException(f"{getattr(trace, 'name', '<stdin>')}: {err}") from None
    for warning in gap_warnings(polls, period):
        click.echo(f"warning: {warning}", err=True)
    for line in describe(bounds(samples, quorum, period, max_age)):
        click.echo(f"convergence: {line}", err=True)
    settings = WindowSettings(samples=samples, quorum=quorum, max_age=max_age)
    if shadow_poll is not None:
        simulate_shadow.run(polls, settings, shadow_poll, admitted, ready)
        return
    steps = simulate_polls(polls, settings, admitted, ready)
    if ramp is not None and admitted is not None:
        rest = admitted if others is None else others
        for step, fields in ramp_fields(steps, ramp, rest, period):
            click.echo(format_step(step, fields))
        return
    for step in steps:
        click.echo(format_step(step))


def ramp_option(
    text: str | None, others: int | None, admitted: int | None, errors: list[str]
) -> MaxIncrease | None:
    """`--max-increase-per-period` read as the annotation is; its errors join `errors`."""
    if others is not None and text is None:
        errors.append(f"--others ({others}) needs --max-increase-per-period")
    try:
        ramp = parse_max_increase(text, "--max-increase-per-period")
    except RampSettingError as err:
        errors.append(str(err))
        return None
    if ramp is not None and admitted is None:
        errors.append(f"--max-increase-per-period ({text}) needs --admitted")
    return ramp
