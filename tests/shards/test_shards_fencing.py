"""Fencing per shard: a replica frozen or cut off past its Leases writes nothing for the
shards the others took, ends those tenures, and goes on running.

tests/chaos/test_fencing.py's two faults, against the replica that holds one service's
shard among three sharded replicas, with the publisher on and worker-a flapping so that
every map and route is rewritten all the time: the replica is frozen (SIGSTOP) until the
others have taken its shards and written every map and route of their services, then
woken; or its link to the API server is cut (while it still reaches the reporters) until
the same, then healed. Then, from the audit log: none of its writes of a taken key lies
between the others' takeover and its own new tenure of that shard (if any), no write of any
replica lies outside a tenure of the key's shard it held, no two replicas' intervals of a
key overlap; from its log: it ended the tenure of every shard it lost; and it is still
running, renews its member Lease again and, once the three are back, the shards are at
rest again (the figures say what was observed).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from contract import assign, at_rest, member_lease_name, shard_of
from fleet import NAMESPACE
from shard_world import GROUP, SHARDS, Replica, ShardWorld, flapping, shards_of

pytestmark = pytest.mark.timeout(300)

Figure = Callable[[str, object], None]
SERVICES = 24
MEMBERS = ("replica-a", "replica-b", "replica-c")
#: the replica at fault: the holder of this service's shard
TARGET = "svc-000"
#: what a replica logs when a tenure of a shard ends (`kube.sharding.ShardLease.end`)
ENDED = "shard tenure ended"


@dataclass
class Target:
    """The replica at fault, its shards and their services, and who takes each shard."""

    replica: Replica
    shards: set[int]
    services: list[str]
    takers: dict[int, str]

    @property
    def identity(self) -> str:
        return self.replica.identity

    @property
    def keys(self) -> list[str]:
        return [f"{NAMESPACE}/{s}" for s in self.services]


async def three_replicas(world: ShardWorld) -> Target:
    """Three replicas, every service routed and published; the replica at fault."""
    await world.publish()
    await world.route(SERVICES)
    for identity in MEMBERS:
        await world.start(identity)
    await world.until_assigned(MEMBERS, timeout=120)
    await world.fleet.until_correct(timeout=120)
    every = {
        (kind, f"{NAMESPACE}/{s}")
        for s in world.fleet.services
        for kind in ("TrafficMap", "HTTPRoute")
    }
    await world.until(
        lambda: every <= world.ledger().written(0.0), 60, "every service's map and route"
    )
    # at rest still, read just before the fault: who takes what follows from these
    await world.until_assigned(MEMBERS, timeout=120)
    holders = await world.holders()
    assert at_rest(SHARDS, MEMBERS, holders), holders
    victim = holders[shard_of(NAMESPACE, TARGET, SHARDS)]
    shards = {s for s, h in holders.items() if h == victim}
    takers = assign(SHARDS, [m for m in MEMBERS if m != victim], holders)
    return Target(world.replicas[victim], shards, shards_of(world.fleet.services, shards), takers)


async def taken_and_rewritten(world: ShardWorld, target: Target, fault: float) -> float:
    """Wait until the others hold the target's shards and have written every map and
    route of its services since `fault`; returns when (wall clock)."""
    others = [m for m in MEMBERS if m != target.identity]
    wanted = {(kind, key) for key in target.keys for kind in ("TrafficMap", "HTTPRoute")}

    def missing() -> list[str]:
        ledger = world.ledger()
        found = []
        for shard in sorted(target.shards):
            tenures = ledger.acquired(shard, fault)
            if not tenures or tenures[0].holder != target.takers[shard]:
                first = tenures[0].holder if tenures else "no one"
                found.append(f"shard {shard}: taken by {first}, not {target.takers[shard]}")
        found += [
            f"{kind} {key} not written"
            for kind, key in sorted(wanted - ledger.written(fault, others))
        ]
        return found

    try:
        return await world.until(
            lambda: not missing(), 120, "the others to take its shards and write its keys"
        )
    except AssertionError as err:
        raise AssertionError(f"{err}: {'; '.join(missing())}") from None


async def back(world: ShardWorld, target: Target, since: float, figure: Figure, name: str) -> None:
    """After the fault: the replica renews its member Lease again and the three are at
    rest again."""
    member = member_lease_name(GROUP, target.identity)
    source = world.replicas[target.identity].link.source
    renewed = await world.until(
        lambda: any(
            r.name == member and r.source == source and r.succeeded and r.at > since
            for r in world.audit.read()
        ),
        60,
        f"{target.identity} to renew its member Lease",
    )
    figure(f"{name}: end of the fault to its member Lease renewed (s)", renewed - since)
    again = await world.until_assigned(MEMBERS, timeout=90)
    figure(
        f"{name}: end of the fault to every shard held as assigned to the three (s)", again - since
    )


def check(
    world: ShardWorld, target: Target, fault: float, woke: float, figure: Figure, name: str
) -> None:
    ledger = world.ledger()
    regained = {s: next(iter(ledger.acquired(s, woke)), None) for s in target.shards}
    late = []
    for service, key in zip(target.services, target.keys, strict=True):
        shard = shard_of(NAMESPACE, service, SHARDS)
        taken = ledger.acquired(shard, fault)[0].start
        again = regained[shard]
        until = (
            again.start if again is not None and again.holder == target.identity else float("inf")
        )
        late += [str(r) for r in ledger.writes_by(target.identity, [key], taken, until)]
    figure(f"{name}: its writes of the taken keys while the others held them", len(late))
    assert late == [], late
    assert ledger.outside_tenure == [], ledger.outside_tenure[:10]
    assert ledger.overlaps() == []
    assert ledger.holder_jumps() == []
    ended = {int(f["shard"]): str(f.get("reason")) for f in target.replica.logged(ENDED)}
    assert target.shards <= set(ended), f"tenures not ended: {sorted(target.shards - set(ended))}"
    figure(f"{name}: why its tenures ended", "; ".join(sorted({ended[s] for s in target.shards})))
    got_back = [s for s, t in regained.items() if t is not None and t.holder == target.identity]
    figure(
        f"{name}: its shards it held again afterwards", f"{len(got_back)} of {len(target.shards)}"
    )
    assert target.replica.running, f"exited:\n{target.replica.process.log[-3000:]}"


async def fault_and_recover(
    world: ShardWorld,
    figure: Figure,
    name: str,
    start: Callable[[Replica], None],
    end: Callable[[Replica], None],
) -> None:
    target = await three_replicas(world)
    figure(
        f"{name}: the replica at fault's shards / services",
        f"{len(target.shards)} / {len(target.services)}",
    )
    async with flapping(world.fleet):
        fault = time.time()
        start(target.replica)
        taken = await taken_and_rewritten(world, target, fault)
        figure(f"{name}: fault to its shards taken and their keys rewritten (s)", taken - fault)
        woke = time.time()
        end(target.replica)
        await back(world, target, woke, figure, name)
    await world.fleet.until_correct(timeout=120)
    check(world, target, fault, woke, figure, name)


async def test_a_replica_frozen_past_its_leases_writes_nothing_for_the_shards_taken(
    world: ShardWorld, figure: Figure
) -> None:
    await fault_and_recover(
        world,
        figure,
        "freeze",
        lambda r: r.signal(signal.SIGSTOP),
        lambda r: r.signal(signal.SIGCONT),
    )


async def test_a_replica_cut_from_the_api_server_writes_nothing_for_the_shards_taken(
    world: ShardWorld, figure: Figure
) -> None:
    await fault_and_recover(
        world, figure, "partition", lambda r: r.link.cut(), lambda r: r.link.heal()
    )
