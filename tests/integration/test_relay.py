"""The local node's relay (`devcluster.relay`): a real process carrying loopback
connections from a listening socket it inherits to one address, both ways, until SIGTERM."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture
def echo() -> Iterator[int]:
    """A loopback server that answers each connection with what it read, upper-cased."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                conn.sendall(data.upper())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def test_the_relay_carries_each_connection_both_ways_and_stops_on_sigterm(echo: int) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    relay = subprocess.Popen(
        [sys.executable, "-m", "ome_routing_dev.devcluster.relay", str(listener.fileno()),
         "127.0.0.1", str(echo)],
        pass_fds=(listener.fileno(),),
    )  # fmt: skip
    listener.close()
    try:
        payload = b"x" * 200_000  # several reads and writes each way
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
                client.sendall(payload)
                client.shutdown(socket.SHUT_WR)  # the relay passes the end on
                answer = b""
                while chunk := client.recv(65536):
                    answer += chunk
            assert answer == payload.upper()
    finally:
        relay.terminate()
        assert relay.wait(timeout=10) == 0


def test_the_relay_refuses_a_malformed_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ome_routing_dev.devcluster.relay", "not-a-fd"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "usage: python -m ome_routing_dev.devcluster.relay FD HOST PORT" in result.stderr
