"""A reference capacity reporter: serves the `Report` format for one home.

OME provides no reporter; this one is a starting point for workload clusters. It answers
`GET` and `POST` at one path with `{"servable": N, "observedAt": "<RFC 3339>"}`.

The count comes from one of two sources:
- a fixed number (`StaticCount`): the stamp is the time of the request, since the number
  is always current;
- a file that another process rewrites (`FileCount`): the stamp is the file's modification
  time, i.e. when the count was worked out. A writer that freezes therefore produces reports
  that age, and the controller drops the home's ceiling once they reach `maxAge`, instead
  of trusting a frozen figure.

A count that cannot be read answers 503 with a short text, which the controller shows as
`capacity endpoint returned HTTP 503`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from aiohttp import web

from ome_routing.core.report import format_rfc3339


class CountUnavailable(Exception):
    """The count cannot be read now; the reporter answers 503."""


class CountSource(Protocol):
    def read(self) -> tuple[int, datetime]:
        """The servable count and when it was worked out."""
        ...


@dataclass
class StaticCount:
    """A fixed count, current at every request."""

    servable: int

    def read(self) -> tuple[int, datetime]:
        return self.servable, datetime.now(UTC)


@dataclass(frozen=True)
class FileCount:
    """A count kept in a file as a whole number; its modification time is the stamp."""

    path: Path

    def read(self) -> tuple[int, datetime]:
        try:
            stat = self.path.stat()
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise CountUnavailable(f"cannot read {self.path}: {err.strerror}") from None
        if not text.isdigit():
            raise CountUnavailable(f"{self.path} holds {text[:32]!r}, not a whole number 0 or more")
        return int(text), datetime.fromtimestamp(stat.st_mtime, UTC)


def render_report(servable: int, observed_at: datetime) -> bytes:
    """The `Report` body."""
    return json.dumps({"servable": servable, "observedAt": format_rfc3339(observed_at)}).encode()


def make_app(source: CountSource, path: str = "/capacity") -> web.Application:
    """An aiohttp application that answers the poll at `path`."""
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} must start with /")

    async def report(_: web.Request) -> web.Response:
        try:
            servable, observed_at = source.read()
        except CountUnavailable as err:
            return web.Response(status=503, text=str(err))
        return web.Response(
            body=render_report(servable, observed_at), content_type="application/json"
        )

    app = web.Application()
    app.router.add_route("GET", path, report)
    app.router.add_route("POST", path, report)
    return app
