"""`FencedClient`: a request the gate refuses never leaves the process.

A loopback web server stands in for the API server and records every request it gets;
the client is lightkube's, configured as the controller configures it, with a gate in
front of its requests. Every kind of write the controller and the publisher make
(create, replace, merge patch, server-side apply, delete, a DELETE with preconditions
built by hand) is tried with the gate shut, then open, then held up after the gate's
first check until the deadline has passed (the test's gate moves its clock past the
deadline as it lets the write through, so the check on the connection, right before the
bytes, is the one that must refuse it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from aiohttp import web
from lightkube import KubeConfig
from lightkube.resources.core_v1 import Service
from lightkube.types import PatchType

from ome_routing.kube.fencing import FencedClient, NotLeader
from ome_routing.kube.leader import LeaderElector
from ome_routing.kube.publishing import fenced_delete
from ome_routing.kube.resources import TrafficMap

from .conftest import Handler, Reporter

pytestmark = pytest.mark.timeout(30)

NAMESPACE = "chat"
Start = Callable[[Handler], Awaitable[Reporter]]


@dataclass
class Gate:
    writes: bool = False
    stepped_down: bool = False

    def check_write(self, request: str) -> None:
        if not self.writes:
            raise NotLeader(request)

    def check_read(self, request: str) -> None:
        if self.stepped_down:
            raise NotLeader(request)


def a_map(version: str = "7") -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "TrafficMap",
        "metadata": {"name": "chat", "namespace": NAMESPACE, "resourceVersion": version},
        "spec": {"service": "chat"},
    }


async def api_server(request: web.Request) -> web.StreamResponse:
    """Answers every request as the API server would, with the map or a Status."""
    if request.method == "DELETE":
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success"})
    if request.method == "GET" and request.path.endswith("/trafficmaps"):
        return web.json_response(
            {"apiVersion": "ome.io/v1beta1", "kind": "TrafficMapList", "items": [a_map()]}
        )
    return web.json_response(a_map("8" if request.method != "GET" else "7"))


def client_for(server: Reporter, gate: Any) -> FencedClient:
    config = KubeConfig.from_dict(
        {
            "clusters": [{"name": "local", "cluster": {"server": server.base}}],
            "users": [{"name": "admin", "user": {"token": "t"}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
    )
    return FencedClient(gate, config, field_manager="ome-routing", trust_env=False)


def writes_seen(server: Reporter) -> list[str]:
    return [f"{r.method} {r.path}" for r in server.requests if r.method != "GET"]


WRITES: dict[str, Callable[[FencedClient], Awaitable[Any]]] = {
    "create": lambda c: c.create(TrafficMap.from_dict(a_map())),
    "replace": lambda c: c.replace(TrafficMap.from_dict(a_map())),
    "merge patch": lambda c: c.patch(
        TrafficMap.Status,
        "chat",
        {"metadata": {"resourceVersion": "7"}, "status": {"sourceUID": "u"}},
        namespace=NAMESPACE,
        patch_type=PatchType.MERGE,
        field_manager="ome-trafficmap-publisher",
    ),
    "apply": lambda c: c.apply(
        TrafficMap.from_dict(a_map()), field_manager="ome-trafficmap-routing", force=True
    ),
    "delete": lambda c: c.delete(TrafficMap, "chat", namespace=NAMESPACE),
    "delete with preconditions": lambda c: fenced_delete(
        c, Service, NAMESPACE, "chat-worker-a", uid="u", resource_version="3"
    ),
}


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_refused_write_never_reaches_the_api_server(reporter: Start, write: str) -> None:
    server = await reporter(api_server)
    client = client_for(server, Gate(writes=False))
    try:
        with pytest.raises(NotLeader):
            await WRITES[write](client)
        assert writes_seen(server) == []
        # reads go on while the replica has not stepped down
        assert (await client.get(TrafficMap, "chat", namespace=NAMESPACE)).metadata is not None
        assert [r.method for r in server.requests] == ["GET"]
    finally:
        await client.close()


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_an_admitted_write_is_sent_as_it_was_made(reporter: Start, write: str) -> None:
    server = await reporter(api_server)
    client = client_for(server, Gate(writes=True))
    try:
        await WRITES[write](client)
        assert len(writes_seen(server)) == 1
    finally:
        await client.close()


async def test_the_patch_keeps_its_resource_version_and_field_manager(reporter: Start) -> None:
    bodies: list[dict[str, Any]] = []

    async def recording(request: web.Request) -> web.StreamResponse:
        if request.method == "PATCH":
            bodies.append(json.loads(await request.read()))
            assert request.query["fieldManager"] == "ome-trafficmap-publisher"
        return await api_server(request)

    server = await reporter(recording)
    client = client_for(server, Gate(writes=True))
    try:
        await WRITES["merge patch"](client)
        assert bodies == [{"metadata": {"resourceVersion": "7"}, "status": {"sourceUID": "u"}}]
    finally:
        await client.close()


async def test_after_stepping_down_not_even_a_read_is_sent(reporter: Start) -> None:
    server = await reporter(api_server)
    client = client_for(server, Gate(writes=False, stepped_down=True))
    try:
        with pytest.raises(NotLeader):
            await client.get(TrafficMap, "chat", namespace=NAMESPACE)
        with pytest.raises(NotLeader):
            [m async for m in client.list(TrafficMap, namespace=NAMESPACE)]
        assert server.requests == []
    finally:
        await client.close()


async def test_a_replica_that_never_led_writes_nothing_through_the_electors_gate(
    reporter: Start,
) -> None:
    server = await reporter(api_server)
    client = client_for(server, Gate(writes=True))
    elector = LeaderElector(client, namespace="ome", name="lease", identity="standby")
    fenced = client_for(server, elector)
    try:
        for write in WRITES.values():
            with pytest.raises(NotLeader):
                await write(fenced)
        assert server.requests == []
    finally:
        await fenced.close()
        await client.close()


@dataclass
class Deadline:
    """A gate open until `deadline` on a clock the test moves, as the elector's."""

    now: float = 0.0
    deadline: float = 10.0
    budget: float | None = None
    checks: int = 0
    #: the clock reaches the deadline right after the first check lets a write through:
    #: the write is held up that long between the check in `send` and the socket
    held_after_the_gate: bool = False

    def check_write(self, request: str) -> float | None:
        self.checks += 1
        if self.now >= self.deadline:
            raise NotLeader(request)
        if self.held_after_the_gate and self.checks == 1:
            self.now = self.deadline
        return self.budget

    def check_read(self, request: str) -> None:
        pass


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_write_held_up_past_the_deadline_after_the_gate_never_reaches_the_wire(
    reporter: Start, write: str
) -> None:
    """As a full GC or a long preflight between the check and the socket: refused there."""
    server = await reporter(api_server)
    gate = Deadline(held_after_the_gate=True)
    client = client_for(server, gate)
    try:
        with pytest.raises(NotLeader):
            await WRITES[write](client)
        assert gate.checks == 2  # let through in `send`, refused before the bytes
        assert writes_seen(server) == []
    finally:
        await client.close()


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_write_inside_its_deadline_is_checked_again_at_the_wire_and_sent(
    reporter: Start, write: str
) -> None:
    server = await reporter(api_server)
    gate = Deadline()
    client = client_for(server, gate)
    try:
        await WRITES[write](client)
        assert len(writes_seen(server)) == 1
        assert gate.checks >= 2  # in send, and on the connection before the bytes
    finally:
        await client.close()


async def test_a_write_that_outlives_its_budget_is_abandoned_as_client_go_abandons_it(
    reporter: Start,
) -> None:
    """The gate's budget is the write's total deadline, whatever the per-phase timeouts."""
    answered = asyncio.Event()

    async def stalled(request: web.Request) -> web.StreamResponse:
        await answered.wait()  # never, while the test runs
        return await api_server(request)

    server = await reporter(stalled)
    client = client_for(server, Deadline(budget=0.2))  # per phase: 10 s
    try:
        with pytest.raises(httpx2.TimeoutException) as caught:
            await WRITES["create"](client)
        assert str(caught.value) == "context deadline exceeded"
    finally:
        answered.set()
        await client.close()
