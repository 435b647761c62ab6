"""Workload clusters on loopback: each has its own 127.x.y.z address, a hostname, and a server.

A `ClusterServer` stands in for a home's model server and its capacity reporter at once: `/`
and every other path answer `served by <cluster>` (and count it, and the `Host` it got);
`/capacity` answers a capacity Report whose `servable` a test can change, and `/v1/models`
(the health probe's path) the status a test sets. `Fleet` hands out one address per cluster
from a /24 of 127.0.0.0/8 picked at random, so that parallel runs do not collide, and one
hostname per cluster (`model.worker-a.example.com`), all known before the gateway starts:
Traefik (Go) caches /etc/hosts for 5 seconds after reading it, so a name added to the file
later can miss that cache and be asked of DNS (the sandbox's recorder) in the meantime.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiohttp import web

from ome_routing.core.report import format_rfc3339

#: The answer of a stand-in model server, so that a response says which cluster served it.
SERVED_BY = "served by "


CLUSTERS = ("worker-a", "worker-b", "worker-c")


def home_host(cluster: str) -> str:
    """The endpoint host of a cluster's homes."""
    return f"model.{cluster}.example.com"


@dataclass
class ClusterServer:
    """One workload cluster's model server and capacity reporter, on its own loopback address."""

    cluster: str
    address: str
    port: int
    host: str = ""
    servable: int = 2
    served: int = 0
    polls: int = 0
    #: what the health path (`/v1/models`, the guide's probe) answers; it is not "served"
    health: int = 200
    #: the `Host` header of every request the model server answered, in order
    hosts_seen: list[str] = field(default_factory=list)
    _runner: web.AppRunner | None = field(default=None, repr=False)

    async def start(self) -> ClusterServer:
        async def capacity(_: web.Request) -> web.Response:
            self.polls += 1
            stamp = format_rfc3339(datetime.now(UTC))
            return web.json_response({"servable": self.servable, "observedAt": stamp})

        async def serve(request: web.Request) -> web.Response:
            self.served += 1
            self.hosts_seen.append(request.headers.get("Host", ""))
            return web.Response(text=f"{SERVED_BY}{self.cluster}")

        async def health(_: web.Request) -> web.Response:
            return web.Response(status=self.health, text=f"health {self.health}")

        app = web.Application()
        app.router.add_route("GET", "/capacity", capacity)
        app.router.add_route("GET", "/v1/models", health)
        app.router.add_route("*", "/{tail:.*}", serve)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.address, self.port).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@dataclass
class Fleet:
    """Loopback addresses for workload clusters, one /24 per fleet."""

    prefix: str = field(
        default_factory=lambda: f"127.{random.randrange(100, 250)}.{random.randrange(1, 255)}"
    )

    def address(self, cluster: str) -> str:
        """The cluster's own address (the same on every call)."""
        return f"{self.prefix}.{CLUSTERS.index(cluster) + 1}"

    def hosts(self) -> dict[str, str]:
        """Every cluster's hostname and address, for the gateway's hosts file."""
        return {home_host(c): self.address(c) for c in CLUSTERS}


def tally(bodies: list[str]) -> Counter[str]:
    """How many answers each cluster served, from the stand-ins' `served by <cluster>` bodies."""
    return Counter(body.removeprefix(SERVED_BY) for body in bodies if body.startswith(SERVED_BY))


#: `await start(clusters)` -> {cluster: started server}, as the `cluster_servers` fixture gives.
StartServers = Callable[[list[str]], Awaitable[dict[str, ClusterServer]]]
