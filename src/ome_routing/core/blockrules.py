"""The rules a capacity poll block and a health probe block share, with their messages.

A poll (`core.pollrules`) and a probe (`core.proberules`) send the same kind of request
on the same kind of schedule, so OME judges their `path`, `method`, `period` and
`timeout`, the `disabled` switch and the chart's `minPeriod` alike, in the same words.
Each check takes the block's field as users spell it (`routing.capacity`,
`spec.routing.probe`) and returns the broken rule's message, or None; the rules modules
call them in their own (OME's) orders.

Chart rules end with `when <field>.path is set` where OME's chart messages do (`when`);
per-service rules have no such ending. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from ome_routing.core.durations import Duration
from ome_routing.core.fields import go_q

#: The methods a poll or probe may use; HEAD is accepted for a poll, as OME does, though
#: its empty body fails every poll as "not a valid report".
METHODS: tuple[str, ...] = ("GET", "HEAD", "POST")
#: Where the chart keeps the observer limits, as users spell it.
OBSERVER_FIELD = "routing.observer"


def when_path_set(field: str) -> str:
    """The ending of a chart rule that holds only for an enabled block."""
    return f"when {field}.path is set"


def path_problem(field: str, path: str) -> str | None:
    """The path must begin with `/`."""
    if not path.startswith("/"):
        return f"{field}.path {go_q(path)} must begin with {go_q('/')}"
    return None


def method_problem(field: str, method: str) -> str | None:
    """The method must be one OME sends."""
    if method not in METHODS:
        return f"{field}.method {go_q(method)} must be GET, HEAD, or POST"
    return None


def not_positive(field: str, numbers: Iterable[tuple[str, int]], when: str) -> str | None:
    """The first of `numbers` (name, value) that is not positive, in a chart rule's words."""
    for name, number in numbers:
        if number <= 0:
            return f"{field}.{name} must be positive {when}"
    return None


def chart_timing_problem(field: str, period: Duration, timeout: Duration) -> str | None:
    """A chart block's period and timeout: both positive, the timeout the shorter."""
    when = when_path_set(field)
    problem = not_positive(
        field, (("period", period.nanoseconds), ("timeout", timeout.nanoseconds)), when
    )
    if problem:
        return problem
    if timeout >= period:
        return f"{field}.timeout ({timeout}) must be shorter than {field}.period ({period})"
    return None


def service_request_problem(field: str, path: str, method: str) -> str | None:
    """The request rules a service's poll and probe share, first in OME's per-service
    order for both: a path beginning with `/`, then a method OME sends."""
    if not path:
        return f"{field}.path is required"
    problem = path_problem(field, path)
    if problem:
        return problem
    if not method:
        return f"{field}.method is required"
    return method_problem(field, method)


def service_timing_problem(field: str, period: Duration, timeout: Duration) -> str | None:
    """A service block's period and timeout: both positive, the timeout the shorter."""
    if period.nanoseconds <= 0:
        return f"{field}.period must be positive"
    if timeout.nanoseconds <= 0:
        return f"{field}.timeout must be positive"
    if timeout >= period:
        return f"{field}.timeout ({timeout}) must be shorter than period ({period})"
    return None


def disabled_problem(field: str, operational: bool, kind: str) -> str | None:
    """`disabled: true` turns a service's block off, so it must set nothing else.

    `kind` is what the block configures: `capacity` or `probe`.
    """
    if operational:
        return f"{field}.disabled must not be combined with {kind} configuration fields"
    return None


def min_period_problem(field: str, period: Duration, min_period: Duration) -> str | None:
    """An enabled chart block may not poll or probe more often than the observer allows."""
    if period < min_period:
        return (
            f"{field}.period ({period}) must be at least {OBSERVER_FIELD}.minPeriod ({min_period})"
        )
    return None
