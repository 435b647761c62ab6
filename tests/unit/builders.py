"""Builders for the window, report and simulate tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from ome_routing.core.capacity import Window, WindowSettings, empty_window, record_reading
from ome_routing.core.durations import Duration
from ome_routing.core.report import Reading, format_rfc3339

T0 = datetime(2026, 9, 28, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """The moment `seconds` after T0."""
    return T0 + timedelta(seconds=seconds)


def settings(samples: int = 10, quorum: int = 2, max_age: str = "30s") -> WindowSettings:
    return WindowSettings(samples=samples, quorum=quorum, max_age=Duration.parse(max_age))


def a_window(samples: int = 10, quorum: int = 2, max_age: str = "30s") -> Window:
    return empty_window(settings(samples, quorum, max_age))


def a_reading(servable: int, observed: float = 0.0) -> Reading:
    """A reading of `servable`, observed `observed` seconds after T0."""
    return Reading(servable=servable, observed_at=at(observed))


def polled(window: Window, *servables: int, start: float = 0.0, period: float = 10.0) -> Window:
    """The window after one fresh poll per value, `period` seconds apart from `start`."""
    for index, servable in enumerate(servables):
        moment = start + index * period
        window = record_reading(window, a_reading(servable, moment), at(moment))
    return window


def report_body(servable: object = 4, observed_at: object = "2026-09-28T10:00:00Z") -> bytes:
    return json.dumps({"servable": servable, "observedAt": observed_at}).encode()


def poll_line(
    seconds: float, servable: object = None, observed: float | None = None, error: str | None = None
) -> str:
    """A simulate trace line for a poll at T0 + seconds."""
    line: dict[str, object] = {"at": format_rfc3339(at(seconds))}
    if error is not None:
        line["error"] = error
    else:
        line["servable"] = servable
        line["observedAt"] = format_rfc3339(at(seconds if observed is None else observed))
    return json.dumps(line)


#: An override that removes the key, for `with_overrides`.
DROP = object()


def with_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of a raw block with `overrides` applied; a value of `DROP` removes the key."""
    block = dict(base)
    for key, value in overrides.items():
        if value is DROP:
            block.pop(key, None)
        else:
            block[key] = value
    return block
