"""One shards test's world: sharded replicas, each through a link of its own, and the Leases.

`ShardWorld` starts `ome-routing controller --sharding --shards 16` processes on the
chaos suite's `Fleet` (its namespace, reporters and `MapRecorder`), each reaching the API
server through a `relay.Relay` with a source address of its own, so that the audit log
says which replica made each write (`ledger.Ledger`). The replicas share the group
`fleet.LEASE`: their member and shard Leases are in the controller's namespace.

The Lease timings are tests/chaos/test_fencing.py's (8 s / 5 s / 1 s), so that a failover
takes seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audit import AuditTail
from contract import FALLBACK_ANNOTATION, GROUP_LABEL, ROLE_LABEL, SHARD_LABEL, at_rest, shard_of
from controller_harness import ControllerProcess, eventually, log_fields
from fencing_world import ENDPOINT
from fleet import CONTROLLER_NAMESPACE, LEASE, NAMESPACE, Fleet
from ledger import Ledger
from lightkube.resources.coordination_v1 import Lease
from relay import Relay, kubeconfig_through

from ome_routing_dev.devcluster.gateway_tools import install_gateway_api_crds

SHARDS = 16
GROUP = LEASE
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 8.0, 5.0, 1.0
TIMING = (
    f"--leader-elect-lease-duration={LEASE_DURATION:g}s",
    f"--leader-elect-renew-deadline={RENEW_DEADLINE:g}s",
    f"--leader-elect-retry-period={RETRY_PERIOD:g}s",
)
#: the bound on a shard without a live holder: the coverage signal's (`shard unowned`)
UNOWNED_BOUND = LEASE_DURATION + 2 * RETRY_PERIOD
#: the replicas a test may start, and the source address each reaches the API server from
SOURCES = {
    "replica-a": "127.0.0.21",
    "replica-b": "127.0.0.22",
    "replica-c": "127.0.0.23",
    "replica-d": "127.0.0.24",
}


@dataclass
class Replica:
    identity: str
    link: Relay
    process: ControllerProcess

    @property
    def pid(self) -> int:
        assert self.process.process is not None
        return self.process.process.pid

    def signal(self, number: signal.Signals) -> None:
        assert self.process.process is not None
        self.process.process.send_signal(number)

    @property
    def running(self) -> bool:
        return self.process.process is not None and self.process.process.poll() is None

    async def gauge(self, name: str) -> float | None:
        """A metric of its /metrics without labels, or None when it has none."""
        for line in (await self.process.metric(name)).splitlines():
            metric, _, value = line.partition(" ")
            if metric == name:
                return float(value)
        return None

    def logged(self, message: str) -> list[dict[str, Any]]:
        """The fields of each line of its log with this message."""
        return log_fields(self.process.log, message)


@dataclass(frozen=True)
class ShardLeaseView:
    shard: int
    holder: str | None  # None: released, or not renewed for its duration
    renewed: datetime | None
    fallback: bool  # taken as a fallback: its holder hands it over later


class ShardWorld:
    def __init__(self, fleet: Fleet, audit_log: Path) -> None:
        self.fleet = fleet
        self.audit = AuditTail(audit_log)
        self.replicas: dict[str, Replica] = {}
        self.publishing = False

    # -- setting up ---------------------------------------------------------------------

    async def publish(self) -> None:
        """Run the publisher too: the Gateway API's CRDs, and routes on a made-up Gateway."""
        plane = self.fleet.plane
        await asyncio.to_thread(install_gateway_api_crds, plane.kubectl, plane.wait_established)
        self.publishing = True

    async def route(self, count: int, **poll: Any) -> list[str]:
        """`count` more routed services on both reporters, created a few at a time (their
        homes named `localhost` when publishing: the publisher takes only host names)."""
        fleet = self.fleet
        host = "localhost" if self.publishing else "127.0.0.1"
        homes = {c: r.url.replace("127.0.0.1", host) for c, r in fleet.reporters.items()}
        names = [f"svc-{i:03d}" for i in range(len(fleet.services), len(fleet.services) + count)]
        batch = asyncio.Semaphore(8)

        async def create(name: str) -> None:
            async with batch:
                await fleet.create_service(name, homes, **poll)

        await asyncio.gather(*(create(name) for name in names))
        fleet.services.extend(names)
        return names

    async def start(self, identity: str) -> Replica:
        """Start a sharded replica through a link of its own (not waited for)."""
        upstream = ("127.0.0.1", self.fleet.plane.ports["kube-apiserver"])
        link = await Relay(upstream, SOURCES[identity]).start()
        kubeconfig = kubeconfig_through(
            self.fleet.plane.kubeconfig, link, self.fleet.workdir / f"kubeconfig-{identity}"
        )
        process = await self.fleet.start_controller(
            identity,
            wait=False,
            kubeconfig=kubeconfig,
            endpoint=ENDPOINT if self.publishing else None,
            args=("--sharding", f"--shards={SHARDS}", *TIMING),
        )
        replica = self.replicas[identity] = Replica(identity, link, process)
        return replica

    async def close(self) -> None:
        for replica in self.replicas.values():
            replica.link.heal()
            if replica.running:
                replica.signal(signal.SIGCONT)
        await asyncio.gather(*(r.process.stop() for r in self.replicas.values()))
        for replica in self.replicas.values():
            await replica.link.close()

    @property
    def identities(self) -> dict[str, str]:
        """Each replica's source address -> its identity (for the audit log)."""
        return {address: identity for identity, address in SOURCES.items()}

    def live(self) -> list[str]:
        return sorted(i for i, r in self.replicas.items() if r.running)

    # -- the Leases ---------------------------------------------------------------------

    async def shard_leases(self) -> dict[int, ShardLeaseView]:
        """Each shard Lease as the API server has it now; a holder whose renewal is older
        than the Lease's duration (wall clock: one machine) counts as none."""
        labels = {GROUP_LABEL: GROUP, ROLE_LABEL: "shard"}
        views = {}
        now = datetime.now(UTC)
        async for lease in self.fleet.client.list(
            Lease, namespace=CONTROLLER_NAMESPACE, labels=labels
        ):
            shard = int((lease.metadata.labels or {})[SHARD_LABEL])
            spec = lease.spec
            holder = spec.holderIdentity if spec else None
            renewed = spec.renewTime if spec else None
            duration = (spec.leaseDurationSeconds if spec else None) or LEASE_DURATION
            if renewed is not None and (now - renewed).total_seconds() >= duration:
                holder = None
            fallback = FALLBACK_ANNOTATION in (lease.metadata.annotations or {})
            views[shard] = ShardLeaseView(shard, holder or None, renewed, fallback)
        return views

    async def holders(self) -> dict[int, str | None]:
        return holders_of(await self.shard_leases())

    async def until_assigned(
        self, members: Iterable[str], timeout: float = 90.0, what: str = ""
    ) -> float:
        """Wait until every shard is held by one of `members`, none as a fallback (its
        holder hands it over later), and `assign` moves none of them from there
        (`contract.at_rest`); returns when that was first seen (wall clock)."""
        live = sorted(set(members))

        async def done() -> float | None:
            with contextlib.suppress(Exception):
                leases = await self.shard_leases()
                fallback = any(lease.fallback for lease in leases.values())
                if not fallback and at_rest(SHARDS, live, holders_of(leases)):
                    return time.time()
            return None

        return await eventually(done, timeout, what or f"every shard held at rest by {live}")

    def ledger(self) -> Ledger:
        return Ledger(
            self.audit.read(),
            group=GROUP,
            shards=SHARDS,
            identities=self.identities,
            lease_duration=LEASE_DURATION,
        )

    # -- waiting ------------------------------------------------------------------------

    async def until(self, probe: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait until `probe()` holds; returns when (wall clock)."""

        async def check() -> float | None:
            return time.time() if probe() else None

        return await eventually(check, timeout, what)


def holders_of(leases: dict[int, ShardLeaseView]) -> dict[int, str | None]:
    """Each shard's live holder (None: no Lease, released or expired)."""
    return {s: (leases[s].holder if s in leases else None) for s in range(SHARDS)}


def shards_of(services: Iterable[str], shards: Iterable[int]) -> list[str]:
    """The services (of the fleet's namespace) whose shard is one of `shards`."""
    wanted = set(shards)
    return [s for s in services if shard_of(NAMESPACE, s, SHARDS) in wanted]


def wrong_services(fleet: Fleet) -> set[str]:
    """The services whose map does not follow the reporters (`Fleet.wrong_maps`)."""
    return {line.split("/", 1)[0] for line in fleet.wrong_maps()}


@contextlib.asynccontextmanager
async def flapping(fleet: Fleet) -> AsyncIterator[None]:
    """worker-a's count flips between 1 and 2 every 0.4 s, so that every map and route is
    rewritten all the time; at the end it stays at 3, a count the flapping never wrote, so
    that every map changes once more (and `fleet.until_correct` says its owner wrote it)."""
    fleet.recorder.rises_allowed = True
    reporter = fleet.reporters["worker-a"]

    async def flip() -> None:
        while True:
            reporter.servable = 3 - reporter.servable
            await asyncio.sleep(0.4)

    task = asyncio.create_task(flip())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        reporter.servable = 3
