"""A connection that ends leaves no garbage cycle behind: reference counting frees it.

The controller runs full garbage collections rarely (`observer/tuning.py`), so a
connection that, once closed, only the collector could free would pile up under
reporters that reset, close or refuse: the chaos suite measured thousands. With the
collector off, the connections that ended must be gone all the same.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from ome_routing.observer.failures import Outcome
from ome_routing.observer.polling import PollClient, request_for_url
from ome_routing.observer.transport import Connection

from .conftest import read_request_head, seconds
from .test_held_writes import CLOSING
from .test_transport import StartRaw

pytestmark = pytest.mark.timeout(30)

POLLS = 40


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        gc.collect()


def connections() -> int:
    """Connection objects the collector tracks: live, or garbage it has not freed."""
    return sum(isinstance(obj, Connection) for obj in gc.get_objects())


async def poll_each(client: PollClient, url: str) -> list[Outcome]:
    request = request_for_url(url, "GET")
    outcomes = [(await client.poll(request, seconds("2s"))).outcome for _ in range(POLLS)]
    for _ in range(3):
        await asyncio.sleep(0)  # the last connection_lost
    return outcomes


@pytest.mark.usefixtures("collector_off")
async def test_connections_closed_after_their_answer_are_freed(
    client: PollClient, raw_server: StartRaw
) -> None:
    async def answer_and_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.write(CLOSING)
        await writer.drain()
        writer.close()

    base = await raw_server(answer_and_close)
    before = connections()
    assert await poll_each(client, base + "/capacity") == [Outcome.OK] * POLLS
    assert connections() - before <= 2


@pytest.mark.usefixtures("collector_off")
async def test_connections_reset_before_their_answer_are_freed(
    client: PollClient, raw_server: StartRaw
) -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_head(reader)
        writer.transport.abort()

    base = await raw_server(reset)
    before = connections()
    outcomes = await poll_each(client, base + "/capacity")
    assert Outcome.OK not in outcomes
    assert connections() - before <= 2


@pytest.mark.usefixtures("collector_off")
async def test_refused_connections_are_freed(client: PollClient, closed_port: int) -> None:
    before = connections()
    outcomes = await poll_each(client, f"http://127.0.0.1:{closed_port}/capacity")
    assert Outcome.OK not in outcomes
    assert connections() - before <= 2
