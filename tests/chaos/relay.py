"""A replica's link to the API server, which a test can cut and bring back: a partition.

`Relay` is a TCP relay on loopback between one controller process and kube-apiserver; the
controller's kubeconfig names the relay (`kubeconfig_through`). It connects upstream from
an address of its own in 127.0.0.0/8, so that the API server's audit log tells the
replicas apart by `sourceIPs`. Reporters are reached directly, so a cut link separates the
replica from the API server only.

`cut()` stops the bytes in both directions, on open connections and on new ones (a new
connection is accepted and held, as a SYN that is retransmitted until the link returns);
`heal()` lets them flow again. What was sent while the link was down is delivered when it
comes back, as TCP retransmission delivers it after a real partition heals, also for a
process that has exited since (its kernel keeps sending the data and the FIN): a request
that was on its way when the link went down reaches the API server late, which is what
the resourceVersion fence is for.

`stall()` makes every connection open at that moment half-open: its bytes stop in both
directions and it is never closed, as when a NAT or a load balancer drops an idle flow
or an API server hangs; connections opened afterwards pass. A stalled connection stays
stalled (as a dropped flow does); the client finds out only by its own timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import yaml

_CHUNK = 65536


class Relay:
    def __init__(self, upstream: tuple[str, int], source: str) -> None:
        self.upstream = upstream
        #: the address the relay connects to the API server from (what the audit log shows)
        self.source = source
        self.port = 0
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        #: one gate per connection: `stall` shuts the gates of the connections open then
        self._gates: set[asyncio.Event] = set()

    async def start(self) -> Relay:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def is_cut(self) -> bool:
        return not self._open.is_set()

    def cut(self) -> None:
        self._open.clear()

    def heal(self) -> None:
        self._open.set()

    def stall(self) -> int:
        """Stop forwarding on every open connection without closing it; returns how many."""
        stalled = 0
        for gate in self._gates:
            if gate.is_set():
                gate.clear()
                stalled += 1
        return stalled

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self._open.set()
        for gate in self._gates:
            gate.set()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        ends = [writer]
        gate = asyncio.Event()
        gate.set()
        self._gates.add(gate)
        try:
            await self._open.wait()
            up_reader, up_writer = await asyncio.open_connection(
                *self.upstream, local_addr=(self.source, 0)
            )
            ends.append(up_writer)
            self._writers.add(up_writer)
            await asyncio.gather(
                self._pump(reader, up_writer, gate), self._pump(up_reader, writer, gate)
            )
        except (OSError, asyncio.CancelledError):
            pass  # the connection ends with the relay (a cancelled handler asyncio would log)
        finally:
            for end in ends:
                end.close()
                self._writers.discard(end)
            self._gates.discard(gate)
            self._tasks.discard(task)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, gate: asyncio.Event
    ) -> None:
        try:
            while True:
                await self._open.wait()
                await gate.wait()
                data = await source.read(_CHUNK)
                if not data:
                    break
                await self._open.wait()  # read just as the link was cut: it waits for the link
                await gate.wait()
                sink.write(data)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()
        except OSError:
            sink.close()


def kubeconfig_through(kubeconfig: Path, relay: Relay, path: Path) -> Path:
    """A copy of `kubeconfig` whose server is the relay (the API server's certificate
    names 127.0.0.1, so TLS holds)."""
    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    path.write_text(yaml.safe_dump(config))
    return path
