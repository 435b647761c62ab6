"""`ome-routing simulate --shadow FILE`: the same trace through a shadow routing policy too.

FILE is a block shaped like `spec.routing` (YAML or JSON), the one an operator would put
in the `routing.ome-routing.io/shadow-routing` annotation or the chart's `shadowRouting`.
It is resolved as the controller resolves it (`core.shadow`, against the chart's default
observer limits), and its `capacity` block's `samples`, `quorum` and `maxAge` judge the
live window's readings at each poll, exactly as the controller judges a shadow
(`core.shadow.shadow_verdict`): the shadow sees the readings the live window keeps.

Each output line is the live line with `shadow` (the same fields, for the shadow) and
`differs` (whether the two ceilings or fallback reasons differ); a summary goes to
stderr. Pure but for reading FILE; the caller prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

import click
import yaml

from ome_routing.core.allocation import allocate
from ome_routing.core.capacity import (
    Verdict,
    WindowSettings,
    empty_window,
    record_failure,
    record_reading,
    verdict,
)
from ome_routing.core.config import OperatorConfig
from ome_routing.core.policy import ROUTING_FIELD
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.core.report import ReportError, format_rfc3339, parse_report
from ome_routing.core.shadow import ShadowError, ShadowSource, resolve_shadow, shadow_verdict

FIELD = "--shadow"


class ShadowFileError(ValueError):
    """A --shadow file that cannot be used; the message names the file and the problem."""


def read_shadow(stream: IO[str]) -> CapacityPolicy:
    """The shadow's poll, from a `spec.routing`-shaped block. Raises `ShadowFileError`."""
    name = getattr(stream, "name", "<stdin>")
    try:
        block: Any = yaml.safe_load(stream.read())
    except yaml.YAMLError as err:
        raise ShadowFileError(f"{FIELD} {name}: not YAML or JSON: {err}") from None
    if not isinstance(block, dict):
        raise ShadowFileError(f"{FIELD} {name}: must hold an object shaped like spec.routing")
    try:
        # named as the block it stands for, as the controller would name its own
        policy = resolve_shadow(None, ShadowSource(ROUTING_FIELD, block), OperatorConfig())
    except ShadowError as err:
        raise ShadowFileError(f"{FIELD} {name}: {err}") from None
    if policy.capacity is None:
        raise ShadowFileError(
            f"{FIELD} {name}: sets no capacity poll (capacity, with its path): nothing to replay"
        )
    return policy.capacity


@dataclass(frozen=True, slots=True)
class Judged:
    """One poll, judged by both policies."""

    at: datetime
    live: Verdict
    shadow: Verdict

    @property
    def differs(self) -> bool:
        return self.live != self.shadow


def replay(
    polls: Iterable[Any], settings: WindowSettings, shadow: CapacityPolicy
) -> Iterator[Judged]:
    """Each poll of the trace through the live window, and the shadow judged on it."""
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
        yield Judged(poll.at, verdict(window, poll.at), shadow_verdict(window, shadow, poll.at))


def _fields(judged: Verdict, admitted: int | None, ready: int | None) -> dict[str, object]:
    line: dict[str, object] = {"ceiling": judged.ceiling, "fallbackReason": judged.fallback_reason}
    if admitted is not None:
        allocation = allocate(admitted, judged.ceiling)
        line["allocated"] = allocation.allocated
        line["source"] = str(allocation.source)
        line["reported"] = allocation.reported
        line["routable"] = min(allocation.allocated, admitted if ready is None else ready)
    return line


def format_judged(judged: Judged, admitted: int | None, ready: int | None) -> str:
    """One output line: the live fields, then `shadow` and `differs`."""
    line: dict[str, object] = {"at": format_rfc3339(judged.at)}
    line |= _fields(judged.live, admitted, ready)
    line["shadow"] = _fields(judged.shadow, admitted, ready)
    line["differs"] = judged.differs
    return json.dumps(line)


def summary(steps: list[Judged]) -> str:
    """The stderr line after the replay."""
    differing = [step for step in steps if step.differs]
    text = f"shadow: differs at {len(differing)} of {len(steps)} poll(s)"
    if differing:
        text += f", first at {format_rfc3339(differing[0].at)}"
    return text


def load(stream: IO[str]) -> CapacityPolicy:
    """`read_shadow`, failing as a usage error of the command."""
    try:
        return read_shadow(stream)
    except ShadowFileError as err:
        raise click.UsageError(str(err)) from None


def run(
    polls: list[Any],
    settings: WindowSettings,
    policy: CapacityPolicy,
    admitted: int | None,
    ready: int | None,
) -> None:
    """Replay and print both timelines (stdout) and the summary (stderr)."""
    steps = list(replay(polls, settings, policy))
    for step in steps:
        click.echo(format_judged(step, admitted, ready))
    click.echo(summary(steps), err=True)
