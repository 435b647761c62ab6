"""The controller's `/metrics` endpoint, served on loopback: the series are written out
in a thread, so a large scrape never holds the event loop that polls and reconciles."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ome_routing.cli.controller import _metrics_app
from ome_routing.metrics import RoutingMetrics


class _Witness(Collector):
    """Records the thread each scrape writes it out on."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.threads.append(threading.get_ident())
        yield GaugeMetricFamily("witness", "The thread of the scrape.", value=1)


async def test_a_scrape_is_written_out_off_the_event_loop() -> None:
    metrics = RoutingMetrics()
    witness = _Witness()
    metrics.registry.register(witness)
    metrics.set_fallback_homes("team-a", "llama", 2)
    loop_thread = threading.get_ident()
    async with TestClient(TestServer(_metrics_app(metrics), host="127.0.0.1")) as client:
        response = await client.get("/metrics")
        body = await response.text()
    assert response.status == 200
    assert response.content_type == "text/plain"
    assert (
        'ome_trafficmap_capacity_fallback_homes{namespace="team-a",trafficmap="llama"} 2.0' in body
    )
    assert witness.threads and loop_thread not in witness.threads


async def test_the_event_loop_keeps_its_turns_while_a_large_scrape_is_written_out() -> None:
    metrics = RoutingMetrics()
    for i in range(30_000):
        metrics.set_fallback_homes("fleet", f"svc-{i:05d}", i % 3)
    turns = 0
    scraping = True

    async def count_turns() -> None:
        nonlocal turns
        while scraping:
            turns += 1
            await asyncio.sleep(0)

    async with TestClient(TestServer(_metrics_app(metrics), host="127.0.0.1")) as client:
        # the connection first: its name lookup may run in a thread, the loop turning
        assert (await client.get("/nothing-here")).status == 404
        counter = asyncio.ensure_future(count_turns())
        await asyncio.sleep(0)
        before = turns
        response = await client.get("/metrics")  # its headers come once the body is written out
        while_written = turns - before
        body = await response.text()
        scraping = False
        await counter
    assert body.count("ome_trafficmap_capacity_fallback_homes{") == 30_000
    # written out on the loop, the whole scrape would be one turn: the counter would get
    # only the few turns of sending the request and reading the status line and headers
    assert while_written > 100
