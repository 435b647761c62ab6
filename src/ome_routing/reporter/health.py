"""A model server's health path for the reference reporter, switchable while it runs.

Health probes ask a home's model server (OME's guide probes `/v1/models`) whether it
answers. This stand-in answers that path the way a person wants to watch it: with a
status that can be switched at run time, to see a home gate and reopen.

An answer is a status (`200`, `503`, any of 100-599) or `stall`: the request is held
without a reply until the answer is switched to a status, as a hung server would hold
it (the probe's `timeout` then fails it as a transport error). A 200 carries an empty
OpenAI-style model list.

Sources:
- `SwitchableHealth`: an answer set in the same process (tests, the demo);
- `FileHealth`: a file that holds the answer, rewritten by a person or a script
  (`echo 503 > health`); a missing file answers 200, so a new home starts healthy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aiohttp import web

STALL = "stall"
#: How often a stalled request looks at its source again.
STALL_CHECK_SECONDS = 0.1
_MODELS = json.dumps({"object": "list", "data": []}).encode()


class HealthSource(Protocol):
    def answer(self) -> int | str:
        """A status, or `stall`."""
        ...


def parse_answer(text: str) -> int | str:
    """`stall` or a status 100-599; raises ValueError for anything else."""
    text = text.strip().lower()
    if text == STALL:
        return STALL
    if text.isdigit() and 100 <= int(text) <= 599:
        return int(text)
    raise ValueError(f"{text[:32]!r} is not a status 100-599 or {STALL!r}")


@dataclass
class SwitchableHealth:
    """An answer set from the same process; 200 until switched."""

    current: int | str = 200

    def answer(self) -> int | str:
        return self.current

    def switch(self, answer: int | str) -> None:
        self.current = parse_answer(str(answer))


@dataclass(frozen=True)
class FileHealth:
    """An answer kept in a file; a missing file answers 200."""

    path: Path

    def answer(self) -> int | str:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 200
        except OSError:
            return 500
        try:
            return parse_answer(text)
        except ValueError:
            return 500


def health_handler(source: HealthSource) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A request handler that answers with the source's current answer."""

    async def health(request: web.Request) -> web.Response:
        answer = source.answer()
        while answer == STALL:
            await asyncio.sleep(STALL_CHECK_SECONDS)
            answer = source.answer()
        assert isinstance(answer, int)
        if answer == 200:
            return web.Response(body=_MODELS, content_type="application/json")
        return web.Response(status=answer, text=f"health answer {answer}")

    return health


def add_health_route(app: web.Application, source: HealthSource, path: str = "/v1/models") -> None:
    """Answer GET, HEAD and POST at `path` with the source's current answer."""
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} must start with /")
    health = health_handler(source)
    # aiohttp answers HEAD through the GET route
    app.router.add_route("GET", path, health)
    app.router.add_route("POST", path, health)
