"""Option types shared by the commands."""

from __future__ import annotations

import click

from ome_routing.core.durations import Duration, DurationError, go_quote, parse_duration


class DurationParam(click.ParamType[Duration]):
    """A Go duration such as `10s` or `500ms`; with `positive`, 0 and below are refused here."""

    name = "duration"

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Duration:
        if isinstance(value, Duration):
            return value
        text = str(value)
        try:
            duration = parse_duration(text)
        except DurationError:
            self.fail(
                f'{go_quote(text)} is not a duration (use forms like "30s", "5m")', param, ctx
            )
        if self.positive and duration.nanoseconds <= 0:
            self.fail(f"{go_quote(text)} must be positive", param, ctx)
        return duration
