"""The renewals' own transport (`kube.lease_wire`) against raw loopback servers.

What the API server would never send, or only rarely: a keep-alive connection it closed
while idle, an answer past the bound, broken framing, an answer that never comes, a 401
after a token rotation, an error that is not a Status. Each fails (or succeeds) the one
request, as the module says, and a connection that failed is never used again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from ome_routing.kube.lease_wire import ANSWER_LIMIT, LeaseWire, WireError

from .conftest import ConnectionHandler

pytestmark = pytest.mark.timeout(30)

StartRaw = Callable[[ConnectionHandler], Awaitable[str]]
PATH = "/apis/coordination.k8s.io/v1/namespaces/routing/leases/routing-shard-03"


def a_lease(version: str = "7") -> Lease:
    now = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
    return Lease(
        metadata=ObjectMeta(name="routing-shard-03", namespace="routing", resourceVersion=version),
        spec=LeaseSpec(holderIdentity="replica-a", leaseDurationSeconds=15, renewTime=now),
    )


def answer(status: int, body: bytes, *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def written(version: str) -> bytes:
    """The API server's answer to a replace: the Lease with its new resourceVersion."""
    lease = a_lease(version).to_dict()
    return answer(200, json.dumps(lease).encode(), "Content-Type: application/json")


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and body (by its Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head, await reader.readexactly(length)


@contextlib.contextmanager
def a_wire(server: str, **kw: Any) -> Iterator[LeaseWire]:
    """A wire to `server` (no TLS), closed at the end."""
    wire = LeaseWire(server, tls=None, **kw)
    try:
        yield wire
    finally:
        wire.close()


async def api_error_of(raw_server: StartRaw, reply: bytes) -> ApiError:
    """The error a renewal raises when the server answers it with `reply`."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply)
        await writer.drain()

    with a_wire(await raw_server(handler)) as wire, pytest.raises(ApiError) as raised:
        await wire.replace(a_lease())
    return raised.value


async def test_a_renewal_is_the_request_lightkubes_replace_sends(raw_server: StartRaw) -> None:
    """The path (with the server's prefix), `fieldManager`, Host, the bearer token and the
    Lease's JSON as the body; the Lease it returns is the answer's, read whole."""
    seen: list[tuple[bytes, bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(written("8"))
        await writer.drain()

    base = await raw_server(handler)
    with a_wire(base + "/k8s/c1/", token="t0ken", field_manager="ome routing") as wire:
        lease = await wire.replace(a_lease("7"))
    assert lease.metadata is not None and lease.metadata.resourceVersion == "8"
    head, body = seen[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == f"PUT /k8s/c1{PATH}?fieldManager=ome%20routing HTTP/1.1"
    port = base.rsplit(":", 1)[1]
    assert f"Host: 127.0.0.1:{port}" in lines
    assert "Authorization: Bearer t0ken" in lines
    assert "Content-Type: application/json" in lines
    assert json.loads(body) == a_lease("7").to_dict()


async def test_a_kept_alive_connection_is_reused_and_one_closed_while_idle_is_replaced(
    raw_server: StartRaw,
) -> None:
    """Two renewals share a connection; then the server closes it idle: the third renewal
    meets the closed connection and is sent again, once, on a fresh one."""
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(0)
        n = len(connections)
        for version in ("8", "9") if n == 1 else ("10",):
            await read_request(reader)
            writer.write(written(version))
            await writer.drain()
        # the first connection closes while idle, after its two answers

    base = await raw_server(handler)
    with a_wire(base) as wire:
        versions = [await wire.replace(a_lease()) for _ in range(2)]
        await asyncio.sleep(0.2)  # the server's close arrives
        versions.append(await wire.replace(a_lease()))
    assert [v.metadata.resourceVersion for v in versions if v.metadata] == ["8", "9", "10"]
    assert len(connections) == 2


async def test_a_conflict_raises_the_api_servers_status(raw_server: StartRaw) -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": 'Operation cannot be fulfilled on leases.coordination.k8s.io "x": '
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
        "reason": "Conflict",
        "code": 409,
    }

    error = await api_error_of(raw_server, answer(409, json.dumps(status).encode()))
    assert error.status.code == 409
    assert error.status.message == status["message"]


async def test_an_error_that_is_not_a_status_is_an_api_error_with_its_code_and_start(
    raw_server: StartRaw,
) -> None:
    error = await api_error_of(raw_server, answer(502, b"<html>bad gateway</html>" + b"x" * 1000))
    assert error.status.code == 502
    message = error.status.message or ""
    assert message.startswith("HTTP 502: <html>bad gateway</html>xxx")
    assert len(message) < 300


async def test_a_401_reads_the_token_file_again_and_sends_once_more(
    raw_server: StartRaw, tmp_path: Path
) -> None:
    """The kubelet rotated the service account's token: the token read at start is
    refused, the file's new one is taken. A token refused again is the 401's error."""
    tokens: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head, _ = await read_request(reader)
            bearer = [ln for ln in head.decode().split("\r\n") if ln.startswith("Authorization")]
            tokens.append(bearer[0].removeprefix("Authorization: Bearer "))
            ok = tokens[-1] == "new"
            writer.write(written("8") if ok else answer(401, b'{"kind":"Status","code":401}'))
            await writer.drain()

    base = await raw_server(handler)
    token_file = tmp_path / "token"
    token_file.write_text("new\n")
    with a_wire(base, token="old", token_file=str(token_file)) as wire:
        await wire.replace(a_lease())
        assert tokens == ["old", "new"]
        await wire.replace(a_lease())  # the new token is kept
        assert tokens == ["old", "new", "new"]
        token_file.write_text("newer")  # not read until a 401
        await wire.replace(a_lease())
        assert tokens[-1] == "new"
    with a_wire(base, token="old") as static, pytest.raises(ApiError) as raised:  # no file
        await static.replace(a_lease())
    assert raised.value.status.code == 401


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (2 * ANSWER_LIMIT)
            + b"x" * (ANSWER_LIMIT + 1),
            f"answer larger than {ANSWER_LIMIT} bytes",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}", "before a whole answer"),
    ],
    ids=["too-large", "malformed", "cut-short"],
)
async def test_a_broken_answer_fails_the_request_and_drops_its_connection(
    raw_server: StartRaw, reply: bytes, words: str
) -> None:
    """Each broken answer fails with the words of what broke; the next renewal opens a
    new connection (the server sees two)."""
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(0)
        await read_request(reader)
        if len(connections) == 1:
            writer.write(reply)
            await writer.drain()
            if words == "before a whole answer":
                return  # closes the connection, the body short
            await reader.read()  # held open until the client drops it
        else:
            writer.write(written("8"))
            await writer.drain()

    with a_wire(await raw_server(handler)) as wire:
        with pytest.raises(WireError, match=words):
            await wire.replace(a_lease())
        lease = await wire.replace(a_lease())
    assert lease.metadata is not None and lease.metadata.resourceVersion == "8"
    assert len(connections) == 2


async def test_an_answer_that_never_comes_ends_at_the_callers_deadline_with_its_connection(
    raw_server: StartRaw,
) -> None:
    dropped = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # silence, until the client hangs up
        dropped.set()

    with a_wire(await raw_server(handler)) as wire:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await wire.replace(a_lease())
        async with asyncio.timeout(5):
            await dropped.wait()


async def test_a_refused_connection_is_a_wire_error_naming_the_server(closed_port: int) -> None:
    with (
        a_wire(f"http://127.0.0.1:{closed_port}") as wire,
        pytest.raises(WireError, match=f"connecting to 127.0.0.1:{closed_port}"),
    ):
        await wire.replace(a_lease())
