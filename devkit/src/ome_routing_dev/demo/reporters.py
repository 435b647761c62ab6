"""Reference capacity reporters on loopback for the demo, one per home, served from a thread.

Each reporter answers the poll with a fixed count (the reference reporter's `make_app`), until
`route_to_model_server()` makes it answer 404 at every path but the model server's own
`/v1/models`: what a home's poll gets when the route to the reporter is missing and OME's
route sends it to the model server instead. `/v1/models` is the health stand-in
(`reporter.health`): 200 until the demo switches it, for the health probe step.

The aiohttp servers run on an event loop in a daemon thread, so that the demo's own steps
(kubectl, subprocesses, waits) stay plain blocking code in the main thread. It never binds
anything but a loopback address (127.0.0.1, or a home's own 127.x.y.z).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar

from aiohttp import web

from ome_routing.reporter.health import SwitchableHealth, add_health_route
from ome_routing.reporter.server import StaticCount, make_app

POLL_PATH = "/capacity"
#: The model server's path that health probes ask; the model server answers it even when
#: the reporter's route is missing.
HEALTH_PATH = "/v1/models"
#: what a home's model server answers, followed by the home's name
SERVED_BY = "served by "
_T = TypeVar("_T")
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class LoopbackReporter:
    """One home's reporter: its loopback URL, and a switch to the model server's 404.

    Given an `address`, a `port` and a `host` (the demo's global endpoint), it binds there,
    its endpoint names the host, and every other path answers as the home's model server
    (`served by <name>`), so that a request through the gateway says where it went.
    """

    def __init__(
        self, name: str, servable: int, address: str = "127.0.0.1", port: int = 0, host: str = ""
    ) -> None:
        self.name = name
        self.servable = servable
        self.address = address
        self.port = port
        self.host = host
        self._count = StaticCount(servable)
        self._missed = threading.Event()
        self._runner: web.AppRunner | None = None
        #: the model server's answer at `HEALTH_PATH`, switched while the demo runs
        self.health = SwitchableHealth()

    @property
    def endpoint(self) -> str:
        """The home's endpoint, as the placement status carries it."""
        return f"http://{self.host or self.address}:{self.port}"

    def set_servable(self, servable: int) -> None:
        """Answer the next polls with another count."""
        self.servable = self._count.servable = servable

    @property
    def poll_url(self) -> str:
        return f"{self.endpoint}{POLL_PATH}"

    def route_to_model_server(self) -> None:
        """From now on, answer every request with the model server's 404."""
        self._missed.set()

    def _app(self) -> web.Application:
        app = make_app(self._count, POLL_PATH)
        add_health_route(app, self.health, HEALTH_PATH)
        if self.host:

            async def model(_: web.Request) -> web.Response:
                return web.Response(text=f"{SERVED_BY}{self.name}")

            app.router.add_route("*", "/{tail:.*}", model)

        @web.middleware
        async def model_server(request: web.Request, handler: _Handler) -> web.StreamResponse:
            if self._missed.is_set() and request.path != HEALTH_PATH:
                return web.Response(status=404, text="404 page not found\n")
            return await handler(request)

        app.middlewares.append(model_server)
        return app

    async def _start(self) -> None:
        runner = web.AppRunner(self._app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.address, self.port)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class LoopbackReporters:
    """Several `LoopbackReporter`s served from one background event loop.

    with LoopbackReporters({"worker-a": 3, "worker-b": 1}) as reporters:
        reporters["worker-b"].route_to_model_server()
    """

    def __init__(
        self, counts: dict[str, int], homes: dict[str, tuple[str, int, str]] | None = None
    ) -> None:
        """`homes`: each home's (address, port, host), for the global endpoint's demo."""
        self._reporters = {
            name: LoopbackReporter(name, n, *(homes or {}).get(name, ("127.0.0.1", 0, "")))
            for name, n in counts.items()
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __getitem__(self, name: str) -> LoopbackReporter:
        return self._reporters[name]

    def __iter__(self) -> Iterator[LoopbackReporter]:
        return iter(self._reporters.values())

    def start(self) -> Self:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="demo-reporters", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            for reporter in self._reporters.values():
                self._call(reporter._start())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every server, close its port, and end the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            for reporter in self._reporters.values():
                self._call(reporter._stop())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            if not thread.is_alive():
                loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)
