"""A TCP relay: connections accepted on an inherited listening socket, each piped to one address.

    python -m ome_routing_dev.devcluster.relay FD HOST PORT

The local node's API server listens inside the node's network namespace; `dev up --node`
binds 127.0.0.1:PORT on the host, and this process, started inside the namespace with that
socket, carries each connection to HOST:PORT there. It relays bytes only (TLS is end to
end) and exits on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys

_CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def _relay(host: str, port: int, fd: int) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        try:
            await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))
        finally:
            for writer in (client_w, server_w):
                writer.close()

    listener = socket.socket(fileno=fd)
    listener.setblocking(False)
    server = await asyncio.start_server(handle, sock=listener)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not argv[0].isdigit() or not argv[2].isdigit():
        print("usage: python -m ome_routing_dev.devcluster.relay FD HOST PORT", file=sys.stderr)
        return 2
    asyncio.run(_relay(argv[1], int(argv[2]), int(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
