"""Scaling a sharded controller 3 -> 4 -> 2: every shard keeps one live holder, and every
key one writer at a time.

Three replicas route 48 services with the publisher on (a route and a Service per home
for each service, written by the replica that holds the service's shard). A fourth
replica starts: the shards `assign` gives it are handed over (their holders release them
once it is alive). Then two replicas get SIGTERM together: they release their shards, and
the two left take them. After each step:

- every shard is held by a running replica and at rest (`assign` moves none); on 3 -> 4
  only shards to the new replica changed hands, at most ceil(16 / 4) of them, and on
  4 -> 2 exactly the leavers' shards (sticky assignment; under the earlier bounded loads
  3 -> 4 moved two shards between the first three, and these two leavers' removal two of
  the others' shards); no shard is without a live holder for longer than the lease
  duration plus two retry periods (from the Leases' writes in the audit log);
- a reporter change after the step reaches every map, each written last by the replica
  that holds its shard (keys follow their shard);
- no key is written by two replicas at overlapping times, every write lies in a tenure of
  the key's shard by its writer, and no Lease names a second holder without the first
  one's release or expiry in between.
"""

from __future__ import annotations

import asyncio
import math
import signal
import time
from collections.abc import Callable

import pytest
from contract import moved, shard_of
from controller_harness import eventually
from fleet import NAMESPACE
from ledger import Ledger
from shard_world import SHARDS, UNOWNED_BOUND, ShardWorld

pytestmark = pytest.mark.timeout(360)

Figure = Callable[[str, object], None]
SERVICES = 48
FIRST = ("replica-a", "replica-b", "replica-c")
JOINING = "replica-d"
#: stopped together: 8 of 16 shards move, theirs (bounded loads moved two more)
LEAVING = ("replica-b", "replica-d")
GAUGES = ("ome_routing_shards_held", "ome_routing_shards_unowned", "ome_routing_shard_members")
UNOWNED = "shard unowned"


async def every_map_follows_its_holder(world: ShardWorld, servable: int, since: float) -> None:
    """worker-a's count set to `servable`: wait until every map follows it, then check
    that each map's last write since `since` was made by its shard's holder."""
    fleet = world.fleet
    fleet.reporters["worker-a"].servable = servable
    await fleet.until_correct(timeout=120)
    holders = await world.holders()
    ledger = world.ledger()
    for name in fleet.services:
        writes = ledger.writes_by_key(f"{NAMESPACE}/{name}", since)
        maps = [w for w in writes if w.kind == "TrafficMap"]
        assert maps, f"{name}: no map write since the step"
        writer = world.identities[maps[-1].source]
        assert writer == holders[shard_of(NAMESPACE, name, SHARDS)], name


async def test_scaling_three_to_four_to_two_keeps_one_holder_per_shard_and_one_writer_per_key(
    world: ShardWorld, figure: Figure
) -> None:
    fleet = world.fleet
    fleet.recorder.rises_allowed = True  # worker-a's count goes up and down below
    await world.publish()
    await world.route(SERVICES)
    for identity in FIRST:
        await world.start(identity)
    steady = await world.until_assigned(FIRST, timeout=120)
    await fleet.until_correct(timeout=120)

    # 3 -> 4
    three = await world.holders()
    started = time.time()
    await world.start(JOINING)
    four_members = (*FIRST, JOINING)
    covered = await world.until_assigned(four_members)
    four = await world.holders()
    figure("3 -> 4: start to every shard held as assigned (s)", covered - started)
    figure("3 -> 4: shards moved (of 16; 1/N = 4)", len(moved(three, four)))
    assert {four[s] for s in moved(three, four)} == {JOINING}, (three, four)
    assert len(moved(three, four)) == math.ceil(SHARDS / 4) == list(four.values()).count(JOINING)
    await every_map_follows_its_holder(world, 2, covered)

    # 4 -> 2
    stopping = time.time()
    for identity in LEAVING:
        world.replicas[identity].signal(signal.SIGTERM)
    left = [m for m in four_members if m not in LEAVING]
    covered = await world.until_assigned(left)
    two = await world.holders()
    codes = await asyncio.gather(*(world.replicas[i].process.wait_exit() for i in LEAVING))
    assert codes == [0, 0], codes
    figure("4 -> 2: SIGTERM to every shard held as assigned (s)", covered - stopping)
    figure("4 -> 2: shards moved (of 16; 1/N = 8)", len(moved(four, two)))
    assert moved(four, two) == {s for s, m in four.items() if m in LEAVING}, (four, two)
    await every_map_follows_its_holder(world, 1, covered)

    ledger: Ledger = world.ledger()
    assert ledger.outside_tenure == [], ledger.outside_tenure[:10]
    assert ledger.overlaps() == []
    assert ledger.holder_jumps() == []
    stretches = ledger.unowned(steady, time.time())
    longest = max((b - a for _, a, b in stretches), default=0.0)
    figure("the longest a shard had no live holder (s)", longest)
    figure("bound: lease + 2 retry periods (s)", UNOWNED_BOUND)
    assert longest <= UNOWNED_BOUND, stretches
    gaps = ledger.handover_gaps()
    figure(
        "keys that changed writer / the shortest gap (s)",
        f"{len(gaps)} / {min(gaps, default=0):.2f}",
    )
    kinds = {r.kind for r in ledger.requests if r.succeeded and r.kind != "Lease"}
    figure("kinds written", ", ".join(sorted(kinds)))
    assert fleet.recorder.violations == []
    assert all(world.replicas[i].running for i in left)

    # what the replicas left say of it: the coverage metrics
    counts = {m: list(two.values()).count(m) for m in left}
    want = {m: (counts[m], 0.0, float(len(left))) for m in left}

    async def metrics() -> dict[str, tuple[float | None, ...]] | None:
        seen = {m: tuple([await world.replicas[m].gauge(g) for g in GAUGES]) for m in left}
        return seen if seen == want else None

    seen = await eventually(metrics, 30, f"{', '.join(GAUGES)} to be {want}")
    figure("shards held / unowned / members, as each replica left says", seen)
    warned = sum(len(world.replicas[m].logged(UNOWNED)) for m in world.replicas)
    figure(f"'{UNOWNED}' warnings", warned)
