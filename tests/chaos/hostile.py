"""One loopback server that plays many misbehaving capacity reporters at once.

Each home's endpoint is `http://127.0.0.1:PORT/h/<home>`; the poll asks
`/h/<home>/capacity`. Every answer is drawn at random from the ways a reporter goes wrong
(404, a stall past the timeout, garbage, a body over the size limit, a reset connection,
a negative or missing count, a frozen or future stamp) or is a good report whose count
flaps. The time of every request is kept per home, to see that polls keep their period.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from aiohttp import web

from ome_routing.core.report import format_rfc3339

BEHAVIOURS = (
    "good",
    "good",
    "good",
    "not-found",
    "stall",
    "garbage",
    "huge",
    "reset",
    "negative",
    "no-count",
    "frozen",
    "future",
)
FROZEN_AT = datetime(2026, 1, 1, tzinfo=UTC)


class HostileReporters:
    def __init__(self, seed: int, stall: float) -> None:
        self._rng = random.Random(seed)
        self._stall = stall
        self.requests: dict[str, list[float]] = defaultdict(list)
        self.url = ""
        self._runner: web.AppRunner | None = None

    def endpoint(self, home: str) -> str:
        return f"{self.url}/h/{home}"

    async def start(self) -> HostileReporters:
        app = web.Application()
        app.router.add_route("*", "/h/{home}/capacity", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.requests[request.match_info["home"]].append(time.monotonic())
        now = datetime.now(UTC)
        behaviour = self._rng.choice(BEHAVIOURS)
        if behaviour == "not-found":
            return web.Response(status=404, text="no such reporter")
        if behaviour == "stall":
            await asyncio.sleep(self._stall)
        if behaviour == "garbage":
            return web.Response(text="{servable: many", content_type="application/json")
        if behaviour == "huge":
            return web.Response(text=json.dumps({"pad": "x" * 100_000}))
        if behaviour == "reset":
            if request.transport is not None:
                request.transport.abort()
            return web.Response()
        body: dict[str, object] = {"servable": self._rng.randint(0, 3)}
        stamp = now
        if behaviour == "negative":
            body["servable"] = -1
        elif behaviour == "no-count":
            del body["servable"]
        elif behaviour == "frozen":
            stamp = FROZEN_AT
        elif behaviour == "future":
            stamp = now + timedelta(hours=1)
        body["observedAt"] = format_rfc3339(stamp)
        return web.json_response(body)
