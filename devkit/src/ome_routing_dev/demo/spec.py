r"""The specification's commands and outputs that the demo runs and checks, copied verbatim.

The commands are shell text exactly as the specification prints them (line continuations
included) and are run through `/bin/sh`, so what the demo shows is what a reader types.

Comparison is per line with trailing blanks ignored: Markdown drops the space that
`{": "}` leaves after `worker-a:` when its `fallbackReason` is empty. A table whose
expected output the specification gives only as values (the condition while a home falls
back) is compared cell by cell, since kubectl sizes its columns to the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

NAMESPACE = "qwen3-0-6b"
NAME = "qwen3-0-6b"


class Match(Enum):
    LINES = "lines"  # the same lines, trailing blanks aside
    CELLS = "cells"  # the same whitespace-separated cells, the last column taken whole


@dataclass(frozen=True)
class SpecCommand:
    """A command from the specification and the output it says the command prints."""

    where: str  # the specification's section, for the reader
    command: str
    expected: str
    match: Match = Match.LINES

    def matches(self, actual: str) -> bool:
        return output_matches(actual, self.expected, self.match)


PLACEMENT_PHASE = SpecCommand(
    where="Prerequisites",
    command=(
        "kubectl get inferenceservice qwen3-0-6b -n qwen3-0-6b "
        "-o jsonpath='{.status.placement.phase}'"
    ),
    expected="Placed",
)

CONDITION_COMMAND = r"""kubectl get trafficmap qwen3-0-6b -n qwen3-0-6b \
  -o 'custom-columns=FALLBACK:.status.conditions[?(@.type=="CapacityFallback")].status,REASON:.status.conditions[?(@.type=="CapacityFallback")].reason,MESSAGE:.status.conditions[?(@.type=="CapacityFallback")].message'"""

CONDITION_AVAILABLE = SpecCommand(
    where="Step 3: Watch the capacity state",
    command=CONDITION_COMMAND,
    expected=(
        "FALLBACK   REASON                      MESSAGE\n"
        "False      EndpointCapacityAvailable   endpoint capacity is available for all 2 home(s)\n"
    ),
)

ENTRIES = SpecCommand(
    where="Step 3: Watch the capacity state",
    command=r"""kubectl get trafficmap qwen3-0-6b -n qwen3-0-6b \
  -o jsonpath='{range .spec.entries[*]}{.cluster}{" "}{.weight}{" "}{.capacity.allocated}{" "}{.capacity.ready}{" "}{.capacity.source}{" "}{.capacity.reported}{"\n"}{end}'""",
    expected="worker-a 2 2 2 ControlPlane 3\nworker-b 1 1 2 Endpoint 1\n",
)

FALLBACK_REASONS = SpecCommand(
    where="A home falls back to its admitted replicas",
    command=r"""kubectl get trafficmap qwen3-0-6b -n qwen3-0-6b \
  -o jsonpath='{range .spec.entries[*]}{.cluster}{": "}{.capacity.fallbackReason}{"\n"}{end}'""",
    expected="worker-a:\nworker-b: capacity endpoint returned HTTP 404\n",
)

CONDITION_FALLBACK = SpecCommand(
    where="A home falls back to its admitted replicas",
    command=CONDITION_COMMAND,
    expected=(
        "FALLBACK REASON MESSAGE\n"
        "True EndpointCapacityUnavailable 1 of 2 home(s) are using control-plane capacity; "
        "inspect spec.entries[].capacity.fallbackReason\n"
    ),
    match=Match.CELLS,
)

FALLBACK_GAUGE = "ome_trafficmap_capacity_fallback_homes"


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _cells(text: str, columns: int) -> list[list[str]]:
    return [line.split(None, columns - 1) for line in _lines(text)]


def output_matches(actual: str, expected: str, match: Match) -> bool:
    """Whether a command printed what the specification says, as `match` compares them."""
    if match is Match.LINES:
        return _lines(actual) == _lines(expected)
    columns = len(_lines(expected)[0].split()) if _lines(expected) else 1
    return _cells(actual, columns) == _cells(expected, columns)


def gauge_lines(exposition: str, name: str = FALLBACK_GAUGE) -> list[str]:
    """The samples of one metric in a Prometheus text exposition."""
    return [line for line in exposition.splitlines() if line.startswith(name + "{")]
