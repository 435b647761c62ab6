"""The idle keep-alive connections of a poll client, and how new ones are opened.

`Pool` hands out an idle connection to an origin (most recent first, within the
keep-alive time), takes back one whose answer was read whole, resolves and connects new
ones (TLS by the standard `ssl` module's default context), and writes the requests of
one turn of the event loop together at its end (`write`; see `observer.transport`).

With the operator's transport settings (`observer.trust`, not OME's), TLS uses their
context, a resolved address is judged by their allow and deny lists before it is
connected to, and a request on an HTTPS connection carries their bearer token.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable

from ome_routing.observer import failures
from ome_routing.observer.transport import Connection, Origin, Resolver
from ome_routing.observer.trust import BearerToken, Trust


class Pool:
    """The idle keep-alive connections of one client, by origin, and how new ones open.

    At most `max_idle` connections wait idle; each for at most `keepalive` seconds (a
    timer that runs while any wait closes the ones past it).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        max_idle: int,
        keepalive: float,
        resolver: Resolver | None,
        trust: Trust | None = None,
    ) -> None:
        self.loop = loop
        self._max_idle = max_idle
        self._keepalive = keepalive
        self._resolver = resolver
        self._idle: dict[Origin, list[Connection]] = {}
        self._idle_count = 0
        self._open: set[Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self._tls: ssl.SSLContext | None = None
        self._trust = trust
        self._token: BearerToken | None = None if trust is None else trust.token
        #: the requests of this turn of the event loop, written together at its end
        self._outgoing: list[tuple[Connection, bytes]] = []

    def write(self, connection: Connection, head: bytes) -> None:
        """Write a request on `connection` at the end of this turn of the event loop."""
        token = self._token
        if token is not None and connection.origin.tls:
            head = token.sign(head, self.loop.time())
        outgoing = self._outgoing
        if not outgoing:
            self.loop.call_soon(self._flush)
        outgoing.append((connection, head))

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        for connection, head in outgoing:
            connection.flush(head)

    def take(self, origin: Origin) -> Connection | None:
        """An idle connection to `origin` that is still fresh, or None."""
        idle = self._idle.get(origin)
        if not idle:
            return None
        oldest = self.loop.time() - self._keepalive
        while idle:
            connection = idle.pop()
            self._idle_count -= 1
            if connection.idle_since > oldest:
                return connection
            connection.abort()
        return None

    def release(self, connection: Connection) -> None:
        """Keep a connection whose answer was read whole for the next request."""
        if self._idle_count >= self._max_idle:
            connection.abort()
            return
        connection.reused = True
        connection.idle_since = self.loop.time()
        idle = self._idle.get(connection.origin)
        if idle is None:  # not `setdefault`, which makes a list on every call
            idle = self._idle[connection.origin] = []
        idle.append(connection)
        self._idle_count += 1
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self._keepalive, self._sweep)

    def forget(self, connection: Connection) -> None:
        """A connection that is closing: never hand it out again."""
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)
            self._idle_count -= 1

    def _sweep(self) -> None:
        self._sweeper = None
        oldest = self.loop.time() - self._keepalive
        for origin, idle in list(self._idle.items()):
            stale = [c for c in idle if c.idle_since <= oldest]
            for connection in stale:
                connection.abort()  # its connection_lost forgets it
            if stale:
                idle[:] = [c for c in idle if c.idle_since > oldest]
                self._idle_count -= len(stale)
            if not idle:
                del self._idle[origin]
        if self._idle_count:
            self._sweeper = self.loop.call_later(self._keepalive, self._sweep)

    async def connect(self, origin: Origin) -> Connection:
        """A new connection to `origin`, or the `PollFailure` of why none could be made."""
        port = origin.port
        hosts = [origin.host] if origin.literal else await self._resolve(origin)
        trust = self._trust
        if trust is not None and trust.checks_addresses:
            hosts = _permitted(hosts, trust)
        context = self._tls_context() if origin.tls else None
        first: BaseException | None = None
        for host in hosts:
            try:
                _, connection = await self.loop.create_connection(
                    self._factory(origin),
                    host,
                    port,
                    ssl=context,
                    server_hostname=origin.host if context is not None else None,
                )
            except (OSError, ssl.CertificateError) as err:
                first = first or err
                continue
            self._open.add(connection)
            return connection
        assert first is not None
        raise failures.connect_failure(first)

    def _factory(self, origin: Origin) -> Callable[[], Connection]:
        return lambda: Connection(self, origin)

    async def _resolve(self, origin: Origin) -> list[str]:
        try:
            if self._resolver is None:
                infos = await self.loop.getaddrinfo(
                    origin.host, origin.port, type=socket.SOCK_STREAM
                )
                hosts = list(dict.fromkeys(str(info[4][0]) for info in infos))
            else:
                answers = await self._resolver.resolve(origin.host, origin.port, socket.AF_UNSPEC)
                hosts = [str(answer["host"]) for answer in answers]
        except OSError as err:
            raise failures.resolve_failure(err) from None
        if not hosts:
            raise failures.unreachable("no such host")
        return hosts

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            trust = self._trust
            self._tls = ssl.create_default_context() if trust is None else trust.ssl_context()
        return self._tls

    def close(self) -> None:
        """Close every connection, idle or in use."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for idle in self._idle.values():
            for connection in idle:
                connection.abort()
        for connection in list(self._open):
            connection.abort()
        self._idle.clear()
        self._idle_count = 0
        self._open.clear()


def _permitted(hosts: list[str], trust: Trust) -> list[str]:
    """The addresses the operator lets polls connect to; none is a failure naming the rule."""
    allowed = [host for host in hosts if trust.refusal(host) is None]
    if not allowed:
        raise failures.unreachable(trust.refusal(hosts[0]) or "")
    return allowed
