"""A small world for the sharded reconcilers: a loopback API server, and a shard owner.

`FakeApi` answers lightkube's requests as kube-apiserver would for the few kinds the
routing controller, the publisher and the journal use (list, watch, get, create, merge
and apply patches, delete), keeps the objects, and records every write it got; a test
can hold a write (`hold`) to have it in flight at a moment of its choosing.

`FakeShards` is a `ShardSet` as the reconcilers see it (`kube.shardwork.ShardOwner`):
it hands out real `ShardLease` tenures and tells its subscribers as the `ShardSet` does
(on a handover the subscribers are awaited before the tenure ends; on a loss, after).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from lightkube import KubeConfig

from ome_routing.core.shards import shard_of
from ome_routing.kube.fencing import FencedClient
from ome_routing.kube.leader import ElectionSettings
from ome_routing.kube.sharding import ShardGate, ShardLease

_PATH = re.compile(
    r"/apis/(?P<group>[^/]+)/(?P<version>[^/]+)"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?"
)

Obj = dict[str, Any]


@dataclass(frozen=True)
class Write:
    method: str
    plural: str
    namespace: str
    name: str
    subresource: str
    body: Obj


def merged(base: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386) of `patch` onto `base`."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def _not_found(name: str) -> web.Response:
    return web.json_response(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
         "message": f"{name} not found", "code": 404},
        status=404,
    )  # fmt: skip


@dataclass
class FakeApi:
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    writes: list[Write] = field(default_factory=list)
    watchers: dict[str, list[asyncio.Queue[Obj]]] = field(default_factory=dict)
    #: awaited with each write request before it is applied (None: none held)
    hold: Callable[[Write], Awaitable[None]] | None = None
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, plural: str, obj: Obj) -> Obj:
        """Store (or replace) an object as a client's write would, and tell the watches."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        key = (plural, meta["namespace"], meta["name"])
        kind = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = obj
        for queue in self.watchers.get(plural, []):
            queue.put_nowait({"type": kind, "object": obj})
        self._changed.set()
        return obj

    def get(self, plural: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((plural, namespace, name))

    def writes_of(self, namespace: str, name: str) -> list[Write]:
        return [w for w in self.writes if (w.namespace, w.name) == (namespace, name)]

    async def until(self, done: Callable[[], bool]) -> None:
        """Wait for `done()` to hold, looking again after every write and every watch, and
        every 50 ms (for what the process does after its last request)."""
        while not done():
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), 0.05)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        match = _PATH.fullmatch(request.path)
        if match is None:
            return _not_found(request.path)
        ns, plural, name, sub = (match[g] for g in ("ns", "plural", "name", "sub"))
        if request.method == "GET":
            if name is None and request.query.get("watch") in ("true", "1"):
                return await self._watch(request, plural)
            if name is None:
                items = [
                    o for (p, n, _), o in self.objects.items() if p == plural and ns in (None, n)
                ]
                return web.json_response(
                    {"apiVersion": "v1", "kind": "List", "items": items,
                     "metadata": {"resourceVersion": str(next(self._versions))}}
                )  # fmt: skip
            found = self.get(plural, ns or "", name)
            return web.json_response(found) if found is not None else _not_found(name)
        body: Obj = json.loads(await request.read() or b"{}")
        if request.method == "POST":
            name = body["metadata"]["name"]
        write = Write(request.method, plural, ns or "", name or "", sub or "", body)
        if self.hold is not None:
            await self.hold(write)
        self.writes.append(write)
        self._changed.set()
        if request.method == "POST":
            body["metadata"].setdefault("namespace", ns)
            return web.json_response(self.put(plural, body), status=201)
        current = self.get(plural, ns or "", name or "")
        if current is None:
            return _not_found(name or "")
        if request.method == "DELETE":
            del self.objects[(plural, ns or "", name or "")]
            for queue in self.watchers.get(plural, []):
                queue.put_nowait({"type": "DELETED", "object": current})
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success"})
        body.get("metadata", {}).pop("resourceVersion", None)
        new = merged(current, body)
        if not sub and new.get("spec") != current.get("spec"):
            new["metadata"]["generation"] = current["metadata"]["generation"] + 1
        return web.json_response(self.put(plural, new))

    async def _watch(self, request: web.Request, plural: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        queue: asyncio.Queue[Obj] = asyncio.Queue()
        self.watchers.setdefault(plural, []).append(queue)
        self._changed.set()
        try:
            while True:
                event = await queue.get()
                await response.write(json.dumps(event).encode() + b"\n")
        finally:
            self.watchers[plural].remove(queue)


def fenced_client(base: str) -> FencedClient:
    """lightkube's client on the loopback API server, fenced by the shard gate."""
    config = KubeConfig.from_dict(
        {
            "clusters": [{"name": "local", "cluster": {"server": base}}],
            "users": [{"name": "admin", "user": {"token": "t"}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
    )
    return FencedClient(ShardGate(), config, field_manager="ome-routing", trust_env=False)


class FakeShards:
    """A shard owner that holds what a test tells it to; see the module docstring."""

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self.leases: dict[int, ShardLease] = {}
        self._subscribers: list[
            tuple[Callable[[ShardLease], None], Callable[[int], Awaitable[None]]]
        ] = []

    def shard(self, key: tuple[str, str]) -> int:
        return shard_of(key[0], key[1], self.shards)

    def tenure_for(self, namespace: str, name: str) -> ShardLease | None:
        return self.leases.get(shard_of(namespace, name, self.shards))

    def subscribe(
        self,
        on_acquired: Callable[[ShardLease], None],
        on_lost: Callable[[int], Awaitable[None]],
    ) -> None:
        self._subscribers.append((on_acquired, on_lost))

    def acquire(self, shard: int) -> ShardLease:
        # renewed at 0 on a clock that stays there: the tenure never passes its deadline
        lease = ShardLease(shard, ElectionSettings(), 0.0, clock=lambda: 0.0)
        self.leases[shard] = lease
        for on_acquired, _ in self._subscribers:
            on_acquired(lease)
        return lease

    async def hand_over(self, shard: int) -> None:
        """As a `ShardSet` hands a shard over: its subscribers first, then the gate shuts."""
        for _, on_lost in self._subscribers:
            await on_lost(shard)
        self.leases.pop(shard).end("handed over")

    async def lose(self, shard: int) -> None:
        """As a `ShardSet` loses a shard: the gate is shut before its subscribers hear."""
        self.leases.pop(shard).end("lost")
        for _, on_lost in self._subscribers:
            await on_lost(shard)
