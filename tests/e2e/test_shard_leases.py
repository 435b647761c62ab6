"""Shard Leases on a real API server: every shard covered by exactly one replica, handed
over only through "no holder", taken from a replica that stopped only after its lease
duration, and a shard no replica can take is reported (metrics, warning, Event).

Several `ShardSet`s run in this process, each as one replica, on the local control
plane's API server, with short timings (lease 4 s, renew deadline 3 s, retry 0.5 s) and
12 shards. A watch on the group's Leases records every change of every shard Lease, so
the tests can check the holder sequence of each shard: a shard never goes from one
holder to another except through no holder (a release), or, after a replica stopped
without releasing, no sooner than a lease duration after its last renewal; and that the
assignment is sticky: a replica that joins takes its share and no other shard moves, and
one that stops (released or not) moves only its own, the others' Leases naming the same
holder throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from controller_harness import eventually, kubectl
from lightkube import AsyncClient, KubeConfig
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.events_v1 import Event
from test_rbac import token_kubeconfig
from tests.chaos.relay import Relay, kubeconfig_through

from ome_routing.core.shards import assign, member_lease_name, shard_lease_name
from ome_routing.kube import lightkube_adapter
from ome_routing.kube.fencing import NotLeader
from ome_routing.kube.leader import ElectionSettings
from ome_routing.kube.sharding import (
    COUNT_LABEL,
    FALLBACK_AFTER_TURNS,
    FALLBACK_ANNOTATION,
    GROUP_LABEL,
    ROLE_LABEL,
    SHARD_LABEL,
    STALE_MEMBER_LEASES,
    UNOWNED_REASON,
    ShardLease,
    ShardSet,
)
from ome_routing.metrics import RoutingMetrics
from ome_routing_dev.devcluster import LocalControlPlane

pytestmark = pytest.mark.timeout(120)

SETTINGS = ElectionSettings(lease_duration=4.0, renew_deadline=3.0, retry_period=0.5)
SHARDS = 12
GROUP = "ome-routing-controller"
PATIENCE = 30.0
#: the replica that joins three, and the one of three that leaves: a placement that is a
#: function of the members alone (the bounded loads used before) moved others' shards
#: with them (the joiner: 2 shards between the three; the leaver: 1 between the others)
JOINING = "replica-x"
LEAVING = "replica-b"


@dataclass
class Replica:
    """One `ShardSet` running, and what it told its subscriber."""

    shard_set: ShardSet
    metrics: RoutingMetrics
    task: asyncio.Task[None] | None = None
    tenures: dict[int, ShardLease] = field(default_factory=dict)
    #: (shard, whether its gate was still open when `on_lost` was awaited)
    lost: list[tuple[int, bool]] = field(default_factory=list)

    @property
    def identity(self) -> str:
        return self.shard_set.identity

    def writable(self) -> set[int]:
        """The shards whose gate lets a write through now."""
        return {s for s, t in self.tenures.items() if not t.ended and t.may_write()}

    def gauge(self, name: str) -> float | None:
        return self.metrics.registry.get_sample_value(name)


@contextlib.asynccontextmanager
async def replicas(
    client: AsyncClient,
    namespace: str,
    *identities: str,
    shards: int = SHARDS,
    settings: ElectionSettings = SETTINGS,
) -> AsyncIterator[dict[str, Replica]]:
    """Replicas started at once (more with `join`), all stopped (cancelled) at the end."""
    fleet: dict[str, Replica] = {}
    for identity in identities:
        join(fleet, client, namespace, identity, shards=shards, settings=settings)
    try:
        yield fleet
    finally:
        tasks = [r.task for r in fleet.values() if r.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def join(
    fleet: dict[str, Replica],
    client: AsyncClient,
    namespace: str,
    identity: str,
    *,
    shards: int = SHARDS,
    settings: ElectionSettings = SETTINGS,
) -> Replica:
    metrics = RoutingMetrics()
    shard_set = ShardSet(
        client,
        namespace=namespace,
        group=GROUP,
        identity=identity,
        shards=shards,
        settings=settings,
        metrics=metrics,
    )
    replica = Replica(shard_set, metrics)

    def on_acquired(tenure: ShardLease) -> None:
        replica.tenures[tenure.shard] = tenure

    async def on_lost(shard: int) -> None:
        replica.lost.append((shard, replica.tenures[shard].may_write()))

    shard_set.subscribe(on_acquired, on_lost)
    replica.task = asyncio.create_task(shard_set.run(), name=identity)
    fleet[identity] = replica
    return replica


async def shard_states(client: AsyncClient, namespace: str) -> dict[int, tuple[str | None, bool]]:
    """Each shard Lease's holder, and whether it carries the fallback annotation."""
    found: dict[int, tuple[str | None, bool]] = {}
    async for lease in client.list(
        Lease, namespace=namespace, labels={GROUP_LABEL: GROUP, ROLE_LABEL: "shard"}
    ):
        assert lease.metadata is not None and lease.metadata.labels is not None
        annotations = lease.metadata.annotations or {}
        found[int(lease.metadata.labels[SHARD_LABEL])] = (
            lease.spec.holderIdentity if lease.spec else None,
            FALLBACK_ANNOTATION in annotations,
        )
    return found


async def holders(client: AsyncClient, namespace: str) -> dict[int, str | None]:
    """Each shard Lease's holder, read from the API server."""
    return {shard: holder for shard, (holder, _) in (await shard_states(client, namespace)).items()}


async def settled(
    client: AsyncClient,
    namespace: str,
    fleet: dict[str, Replica],
    shards: int = SHARDS,
    *,
    history: LeaseHistory | None = None,
) -> dict[int, str]:
    """Wait until the Leases are at rest over the fleet's members (every shard held by
    one, and `assign` from these holders moves none), and each replica's open gates are
    exactly the shards the Leases give it; returns the holders. With a `history`, also
    until its watch has delivered every change up to that rest."""

    async def probe() -> dict[int, str] | None:
        found = await holders(client, namespace)
        want = assign(shards, fleet, found)
        if {s: found.get(s) for s in range(shards)} != want:
            return None
        for replica in fleet.values():
            if replica.writable() != {s for s, m in want.items() if m == replica.identity}:
                return None
        return want

    found = await eventually(probe, PATIENCE, f"the shards at rest over {sorted(fleet)}")
    if history is not None:
        await history.caught_up()
    return found


@dataclass
class Seen:
    holder: str | None
    renewed: datetime | None
    acquired: datetime | None
    version: int


class LeaseHistory:
    """Every change of the group's shard Leases, from a watch started before the replicas."""

    def __init__(self, client: AsyncClient, namespace: str) -> None:
        self._client = client
        self._namespace = namespace
        self.by_shard: dict[int, list[Seen]] = {}
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LeaseHistory:
        self._task = asyncio.create_task(self._watch())
        # the watch is open once it shows a marker Lease created after it started
        marker = Lease(
            metadata=ObjectMeta(
                name="marker", namespace=self._namespace, labels={GROUP_LABEL: GROUP}
            ),
            spec=LeaseSpec(),
        )
        await self._client.create(marker)
        await asyncio.wait_for(self._ready.wait(), PATIENCE)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _watch(self) -> None:
        async for _kind, lease in self._client.watch(
            Lease, namespace=self._namespace, labels={GROUP_LABEL: GROUP}
        ):
            meta = lease.metadata or ObjectMeta()
            if meta.name == "marker":
                self._ready.set()
                continue
            labels = meta.labels or {}
            if labels.get(ROLE_LABEL) != "shard":
                continue
            spec = lease.spec or LeaseSpec()
            self.by_shard.setdefault(int(labels[SHARD_LABEL]), []).append(
                Seen(
                    spec.holderIdentity,
                    spec.renewTime,
                    spec.acquireTime,
                    int(meta.resourceVersion or 0),
                )
            )

    async def caught_up(self) -> None:
        """Wait until the watch has delivered each shard Lease's state as a list shows it
        now (or a later one): the list and the watch are two reads, and on a loaded
        machine the watch's events can come after the list that already shows them."""
        listed: dict[int, int] = {}
        async for lease in self._client.list(
            Lease, namespace=self._namespace, labels={GROUP_LABEL: GROUP, ROLE_LABEL: "shard"}
        ):
            meta = lease.metadata or ObjectMeta()
            listed[int((meta.labels or {})[SHARD_LABEL])] = int(meta.resourceVersion or 0)

        async def delivered() -> bool:
            return all(
                bool(self.by_shard.get(shard)) and self.by_shard[shard][-1].version >= version
                for shard, version in listed.items()
            )

        await eventually(delivered, PATIENCE, "the Lease history up to the API server's list")

    def holders(self, shard: int) -> list[str | None]:
        """The shard's holders in order, repeats collapsed."""
        out: list[str | None] = []
        for seen in self.by_shard.get(shard, []):
            if not out or out[-1] != seen.holder:
                out.append(seen.holder)
        return out

    def direct_takeovers(self, shard: int) -> list[tuple[Seen, Seen]]:
        """Each change from one holder straight to another (no release between)."""
        seen = self.by_shard.get(shard, [])
        return [
            (before, after)
            for before, after in itertools.pairwise(seen)
            if before.holder and after.holder and before.holder != after.holder
        ]


async def test_three_replicas_cover_every_shard_once_and_a_fourth_takes_its_share_through_a_release(
    kube_client: AsyncClient, namespace: str
) -> None:
    async with (
        LeaseHistory(kube_client, namespace) as history,
        replicas(kube_client, namespace, "replica-a", "replica-b", "replica-c") as fleet,
    ):
        before = await settled(kube_client, namespace, fleet, history=history)
        held = [r.writable() for r in fleet.values()]
        assert set().union(*held) == set(range(SHARDS))
        assert sum(len(h) for h in held) == SHARDS  # no shard open in two replicas
        for replica in fleet.values():
            assert replica.gauge("ome_routing_shards_held") == len(replica.writable())
            assert replica.gauge("ome_routing_shard_members") == 3
            assert replica.shard_set.answering()

        told = {identity: len(r.lost) for identity, r in fleet.items()}
        handed_before = handed_over(fleet)
        seen = {s: len(history.by_shard.get(s, [])) for s in range(SHARDS)}
        d = join(fleet, kube_client, namespace, JOINING)
        after = await settled(kube_client, namespace, fleet, history=history)
        moved = {s for s in range(SHARDS) if before[s] != after[s]}
        taken = {s for s, m in after.items() if m == JOINING}
        # its share, and only the shards it took moved
        assert taken == moved and len(taken) == SHARDS // 4, (before, after)
        assert kept_their_holders(history, before, seen, set(range(SHARDS)) - moved)

        # every shard that moved went holder -> no holder -> new holder, and the old
        # holder was told with its gate still open (the work in flight finishes)
        for shard in moved:
            assert history.holders(shard)[-3:] == [before[shard], None, after[shard]]
            old = fleet[before[shard]]
            assert (shard, True) in old.lost[told[old.identity] :]
            assert not old.tenures[shard].may_write()
        assert all(not history.direct_takeovers(s) for s in range(SHARDS))
        # (at least: on a loaded machine a late renewal may cost a tenure, taken again)
        assert transitions(d, "acquired") >= len(taken)
        assert handed_over(fleet) - handed_before >= len(moved)


def transitions(replica: Replica, reason: str) -> float:
    value = replica.metrics.registry.get_sample_value(
        "ome_routing_shard_transitions_total", {"reason": reason}
    )
    return value or 0.0


def handed_over(fleet: dict[str, Replica]) -> float:
    return sum(transitions(r, "handed_over") for r in fleet.values())


async def test_a_replica_stopped_releases_its_shards_and_the_others_take_them_at_once(
    kube_client: AsyncClient, namespace: str
) -> None:
    async with (
        LeaseHistory(kube_client, namespace) as history,
        replicas(kube_client, namespace, "replica-a", "replica-b", "replica-c") as fleet,
    ):
        before = await settled(kube_client, namespace, fleet, history=history)
        seen = {s: len(history.by_shard.get(s, [])) for s in range(SHARDS)}
        leaving = fleet.pop(LEAVING)
        told = len(leaving.lost)
        assert leaving.task is not None
        leaving.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leaving.task
        # on its way out it told its subscriber with the gates open, then released all
        mine = {s for s, m in before.items() if m == LEAVING}
        assert sorted(leaving.lost[told:]) == sorted((s, True) for s in mine)
        member = await kube_client.get(
            Lease, member_lease_name(GROUP, LEAVING), namespace=namespace
        )
        assert member.spec is not None and member.spec.holderIdentity is None

        after = await settled(kube_client, namespace, fleet, history=history)
        assert {s for s in range(SHARDS) if before[s] != after[s]} == mine, (before, after)
        for shard in mine:
            # released (no holder) before another took it: not taken by expiry
            assert history.holders(shard)[-3:-1] == [LEAVING, None]
        assert all(not history.direct_takeovers(s) for s in range(SHARDS))
        assert transitions(leaving, "released") == len(mine)
        assert kept_their_holders(history, before, seen, set(range(SHARDS)) - mine)


async def test_the_shards_of_a_replica_that_stops_without_releasing_are_taken_after_the_lease_duration(
    kube_client: AsyncClient, namespace: str
) -> None:
    """`abandon()` stands for a SIGKILL: no further request, the Leases left held."""
    async with (
        LeaseHistory(kube_client, namespace) as history,
        replicas(kube_client, namespace, "replica-a", "replica-b", "replica-c") as fleet,
    ):
        before = await settled(kube_client, namespace, fleet, history=history)
        seen = {s: len(history.by_shard.get(s, [])) for s in range(SHARDS)}
        gone = fleet.pop(LEAVING)
        gone.shard_set.abandon()
        mine = {s for s, m in before.items() if m == LEAVING}
        after = await settled(kube_client, namespace, fleet, history=history)
        assert {s for s in range(SHARDS) if before[s] != after[s]} == mine, (before, after)
        for shard in mine:
            takeovers = history.direct_takeovers(shard)
            assert len(takeovers) == 1, takeovers  # never released: taken over by expiry
            last, taken = takeovers[0]
            assert last.holder == LEAVING
            assert last.renewed is not None and taken.acquired is not None
            # not before a lease duration after the last renewal it saw (one clock:
            # the replicas all stamp with this process's wall clock)
            waited = (taken.acquired - last.renewed).total_seconds()
            assert waited >= SETTINGS.lease_duration, (shard, waited)
        member = await kube_client.get(
            Lease, member_lease_name(GROUP, LEAVING), namespace=namespace
        )
        assert member.spec is not None and member.spec.holderIdentity == LEAVING
        for shard in set(range(SHARDS)) - mine:
            assert not history.direct_takeovers(shard)
        assert kept_their_holders(history, before, seen, set(range(SHARDS)) - mine)


def kept_their_holders(
    history: LeaseHistory, before: dict[int, str], seen: dict[int, int], shards: set[int]
) -> bool:
    """Whether every change of these shards' Leases since `seen` (a count of changes per
    shard) names the holder of `before`: renewed, never released nor taken."""
    changed = {
        shard: {c.holder for c in history.by_shard.get(shard, [])[seen[shard] :]} - {before[shard]}
        for shard in shards
    }
    assert not any(changed.values()), changed
    return True


def leases_role(namespace: str, account: str, updatable: list[str]) -> str:
    """A grant as the chart's, whose `update` names only `updatable` Leases."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": account, "namespace": namespace},
                    "rules": [
                        {
                            "apiGroups": ["coordination.k8s.io"],
                            "resources": ["leases"],
                            "verbs": ["get", "list", "watch", "create"],
                        },
                        {
                            "apiGroups": ["coordination.k8s.io"],
                            "resources": ["leases"],
                            "verbs": ["update"],
                            "resourceNames": updatable,
                        },
                        {
                            "apiGroups": ["events.k8s.io"],
                            "resources": ["events"],
                            "verbs": ["create"],
                        },
                    ],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": account, "namespace": namespace},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": account,
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": account, "namespace": namespace}
                    ],
                },
            ],
        }
    )


async def test_a_shard_no_replica_can_take_is_counted_warned_of_and_gets_one_event(
    kube_client: AsyncClient,
    namespace: str,
    control_plane: LocalControlPlane,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The replica's grant names only half the shard Leases (a `resourceNames` list that
    does not match `--shards`): the others exist, released, and stay unowned."""
    caplog.set_level("WARNING", logger="ome_routing.kube.sharding")
    shards = 8
    for shard in range(shards):
        await kube_client.create(
            Lease(
                metadata=ObjectMeta(
                    name=shard_lease_name(GROUP, shard),
                    namespace=namespace,
                    labels={GROUP_LABEL: GROUP, ROLE_LABEL: "shard", SHARD_LABEL: str(shard)},
                ),
                spec=LeaseSpec(leaseDurationSeconds=1),
            )
        )
    account = f"shards-{uuid.uuid4().hex[:6]}"
    await kubectl(control_plane, "create", "serviceaccount", account, "-n", namespace)
    updatable = [member_lease_name(GROUP, "replica-a")]
    updatable += [shard_lease_name(GROUP, s) for s in range(shards // 2)]
    await kubectl(
        control_plane, "apply", "-f", "-", input=leases_role(namespace, account, updatable)
    )
    token = (
        await kubectl(control_plane, "create", "token", account, "-n", namespace)
    ).stdout.strip()
    config = token_kubeconfig(control_plane, token, tmp_path / "replica.kubeconfig")
    client = AsyncClient(KubeConfig.from_file(config), trust_env=False, field_manager="e2e")
    refused = set(range(shards // 2, shards))
    try:
        async with replicas(client, namespace, "replica-a", shards=shards) as fleet:
            replica = fleet["replica-a"]

            async def reported() -> dict[str, list[Any]] | None:
                events: dict[str, list[Any]] = {}
                async for event in kube_client.list(Event, namespace=namespace):
                    if event.reason == UNOWNED_REASON and event.regarding is not None:
                        events.setdefault(str(event.regarding.name), []).append(event)
                names = {shard_lease_name(GROUP, s) for s in refused}
                return events if set(events) == names else None

            events = await eventually(reported, PATIENCE, "a ShardUnowned Event per shard")
            assert replica.writable() == set(range(shards // 2))
            assert replica.gauge("ome_routing_shards_unowned") == len(refused)
            assert replica.gauge("ome_routing_shards_held") == shards // 2
            for name, written in events.items():
                event = written[0]
                assert event.type == "Warning"
                assert event.regarding is not None and event.regarding.kind == "Lease"
                assert event.note is not None and f"shard {name.rsplit('-', 1)[1]} " in event.note
            warned = {
                r.__dict__["shard"] for r in caplog.records if r.getMessage() == "shard unowned"
            }
            assert warned == refused

            # once a spell: a few more turns (the member Lease renewed again) add none
            async def renewals() -> list[datetime]:
                lease = await kube_client.get(
                    Lease, member_lease_name(GROUP, "replica-a"), namespace=namespace
                )
                assert lease.spec is not None and lease.spec.renewTime is not None
                return [lease.spec.renewTime]

            first = (await renewals())[0]

            async def three_turns_later() -> bool:
                renewed = (await renewals())[0]
                return (renewed - first).total_seconds() >= 3 * SETTINGS.retry_period

            await eventually(three_turns_later, PATIENCE, "more turns")
            again = await reported()
            assert again is not None and all(len(e) == 1 for e in again.values())
    finally:
        await client.close()


async def test_a_tenure_refuses_writes_once_renewals_fail_past_the_renew_deadline(
    kube_client: AsyncClient, namespace: str, control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    """The replica reaches the API server through a relay the test cuts (a partition)."""
    relay = await Relay(("127.0.0.1", control_plane.ports["kube-apiserver"]), "127.0.0.2").start()
    config = kubeconfig_through(control_plane.kubeconfig, relay, tmp_path / "relay.kubeconfig")
    client = AsyncClient(KubeConfig.from_file(config), trust_env=False, field_manager="e2e")
    try:
        async with replicas(client, namespace, "replica-a", shards=4) as fleet:
            replica = fleet["replica-a"]
            await settled(kube_client, namespace, fleet, shards=4)
            tenure = replica.tenures[0]
            assert tenure.check_write("PATCH /x") == (
                SETTINGS.lease_duration - SETTINGS.renew_deadline
            )
            relay.cut()
            await eventually(lambda: _true(tenure.ended), PATIENCE, "the tenure to end")
            with pytest.raises(NotLeader, match="shard 0 is not held"):
                tenure.check_write("PATCH /x")
            await eventually(lambda: _true(len(replica.lost) == 4), PATIENCE, "every loss told")
            # a loss is told with the gate already shut
            assert sorted(replica.lost) == [(s, False) for s in range(4)]
            assert replica.shard_set.held() == frozenset()
            assert not replica.shard_set.answering()
            assert transitions(replica, "lost") == 4
            relay.heal()
            # back: the Leases still name it and nobody took them, so it takes them again
            await eventually(
                lambda: _true(replica.writable() == set(range(4))), PATIENCE, "shards again"
            )
            assert tenure.ended and replica.tenures[0] is not tenure
    finally:
        await client.close()
        await relay.close()


#: the warning of a replica that keeps off keys another writer holds
ANOTHER_WRITER = "keys held by a leader or by replicas with another shard count"


def _logged(caplog: pytest.LogCaptureFixture, message: str) -> bool:
    return any(r.getMessage() == message for r in caplog.records)


async def _true(value: bool) -> bool:
    return value


async def test_a_replica_with_another_shard_count_takes_nothing_until_the_others_are_gone(
    kube_client: AsyncClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Replicas of one group with different `--shards` split the keys differently, so a
    key could have a writer in each: one with another count takes no shard while a live
    shard Lease carries another count (a rolling update of `--shards`), and takes them
    all once the others have released theirs."""
    caplog.set_level(logging.WARNING, logger="ome_routing.kube.sharding")
    async with replicas(kube_client, namespace, "old-a", "old-b", shards=8) as old:
        await settled(kube_client, namespace, old, shards=8)
        async with replicas(kube_client, namespace, "new-a", shards=12) as new:
            replica = new["new-a"]

            # positive signals first: it saw the other count, and it has gone on turning
            # past the point where a free shard is taken even by a replica not preferred
            # for it (a lease duration): shards 8-11 have no Lease, and it warns of them
            # as unowned past lease duration + 2 retries
            await eventually(
                lambda: _true(_logged(caplog, ANOTHER_WRITER)),
                PATIENCE,
                "the warning of another shard count",
            )
            await eventually(
                lambda: _true(_logged(caplog, "shard unowned")), PATIENCE, "shards 8-11 unowned"
            )
            assert replica.writable() == set(), "took a shard beside another count"
            assert replica.gauge("ome_routing_shards_unowned") == 4
            assert all(r.gauge("ome_routing_shard_members") == 2 for r in old.values())
            held = await holders(kube_client, namespace)
            assert {held[s] for s in range(8)} <= {"old-a", "old-b"}
            assert all(held.get(s) is None for s in range(8, 12))
            # the old replicas stop (releasing their shards): the new one takes all 12
            for r in old.values():
                assert r.task is not None
                r.task.cancel()
            await asyncio.gather(*(r.task for r in old.values() if r.task), return_exceptions=True)
            await eventually(
                lambda: _true(replica.writable() == set(range(12))),
                PATIENCE,
                "new-a holding all 12 shards",
            )


async def test_a_sharded_replica_takes_nothing_while_a_leader_of_the_groups_name_lives(
    kube_client: AsyncClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A rollout that turns sharding on meets the old leader (`--lease-name` without
    `--sharding`), which writes every key: the sharded replica takes no shard while that
    Lease is renewed, and takes them all once it is released."""
    caplog.set_level(logging.WARNING, logger="ome_routing.kube.sharding")
    leader = await kube_client.create(
        Lease(
            metadata=ObjectMeta(name=GROUP, namespace=namespace),
            spec=LeaseSpec(holderIdentity="leader-x", leaseDurationSeconds=4),
        )
    )

    async def renew() -> None:
        nonlocal leader
        while True:
            assert leader.spec is not None
            leader.spec.renewTime = datetime.now(UTC)
            leader = await kube_client.replace(leader)
            await asyncio.sleep(0.5)

    renewing = asyncio.create_task(renew())
    try:
        async with replicas(kube_client, namespace, "sharded-a", shards=4) as fleet:
            replica = fleet["sharded-a"]
            await eventually(
                lambda: _true(_logged(caplog, ANOTHER_WRITER)),
                PATIENCE,
                "the warning of a leader",
            )
            # and past the point where a free shard is taken by anyone (a lease duration)
            await eventually(
                lambda: _true(_logged(caplog, "shard unowned")),
                PATIENCE,
                "the shards unowned past the bound",
            )
            assert replica.writable() == set()
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            # a replace cut short by the cancel may still have been written: read it again
            leader = await kube_client.get(Lease, GROUP, namespace=namespace)
            assert leader.spec is not None
            leader.spec.holderIdentity = None
            leader = await kube_client.replace(leader)
            await eventually(
                lambda: _true(replica.writable() == set(range(4))),
                PATIENCE,
                "sharded-a holding all 4 shards",
            )
    finally:
        renewing.cancel()


async def test_a_member_lease_release_that_meets_a_conflict_reads_the_lease_again(
    kube_client: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    """At shutdown a replica releases its member Lease first. A renewal the stop cut short
    can still be written after the release read the Lease: the release's write then meets
    a 409 from the API server. It reads the Lease again and releases it, rather than leave
    the others preferring a stopped replica for a lease duration. Here the test writes the
    Lease between the release's read and its write, once."""
    name = member_lease_name(GROUP, "replica-a")
    await released_after_a_late_write(kube_client, kubeconfig, namespace, name)


async def test_a_shard_lease_release_that_meets_a_conflict_reads_the_lease_again(
    kube_client: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    """At shutdown a replica releases each shard Lease with the version it last wrote. A
    renewal the stop cut short can still have been written since: the release then meets
    a 409 from the API server. It reads the Lease again and releases it, rather than leave
    the shard to wait a lease duration for its next holder. Here the test writes one
    shard's Lease just before its release, once."""
    name = shard_lease_name(GROUP, 0)
    await released_after_a_late_write(kube_client, kubeconfig, namespace, name)


async def released_after_a_late_write(
    kube_client: AsyncClient, kubeconfig: Path, namespace: str, name: str
) -> None:
    """Run replica-a until it holds every shard, then stop it; the first release write of
    the Lease `name` finds the Lease written just before it (as a late renewal would):
    that write gets a 409, the next a 200, and the Lease is left with no holder."""
    answers: list[int] = []

    async def cut_in(request: Any, stream: bool, send: lightkube_adapter.Send) -> Any:
        releasing = (
            request.method == "PUT"
            and request.url.path.endswith(f"/leases/{name}")
            and not json.loads(request.content)["spec"].get("holderIdentity")
        )
        if not releasing:
            return await send(request, stream)
        if not answers:  # a write of the Lease lands first, as a late renewal would
            lease = await kube_client.get(Lease, name, namespace=namespace)
            assert lease.spec is not None
            lease.spec.renewTime = datetime.now(UTC)
            await kube_client.replace(lease)
        response = await send(request, stream)
        answers.append(response.status_code)
        return response

    client = AsyncClient(
        KubeConfig.from_file(kubeconfig), trust_env=False, field_manager="e2e-replica"
    )
    lightkube_adapter.filter_sends(client, cut_in)
    try:
        async with replicas(client, namespace, "replica-a") as fleet:
            await eventually(
                lambda: _true(fleet["replica-a"].writable() == set(range(SHARDS))),
                PATIENCE,
                "replica-a holding every shard",
            )
    finally:
        await client.close()
    assert answers == [409, 200], answers
    lease = await kube_client.get(Lease, name, namespace=namespace)
    assert lease.spec is not None and lease.spec.holderIdentity is None, lease.spec


async def test_a_member_lease_left_unrenewed_is_deleted_and_the_live_ones_are_kept(
    kube_client: AsyncClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica gone for good (a Deployment's pod comes back under a new name) leaves
    its member Lease: once it has gone unrenewed `STALE_MEMBER_LEASES` lease durations in
    a live replica's view, that replica deletes it; a released one goes the same way, and
    the live members' Leases stay. Leases of 1 s here, so stale after 10 s."""
    caplog.set_level(logging.INFO, logger="ome_routing.kube.sharding")
    quick = ElectionSettings(lease_duration=1.0, renew_deadline=0.8, retry_period=0.2)
    long_ago = datetime(2026, 1, 1, microsecond=1, tzinfo=UTC)  # a MicroTime needs one
    left = {"gone-killed": "gone-killed", "gone-released": None}
    for identity, holder in left.items():
        await kube_client.create(
            Lease(
                metadata=ObjectMeta(
                    name=member_lease_name(GROUP, identity),
                    namespace=namespace,
                    labels={GROUP_LABEL: GROUP, ROLE_LABEL: "member", COUNT_LABEL: str(SHARDS)},
                ),
                spec=LeaseSpec(holderIdentity=holder, leaseDurationSeconds=1, renewTime=long_ago),
            )
        )

    async def members() -> set[str]:
        found = set()
        async for lease in kube_client.list(
            Lease, namespace=namespace, labels={GROUP_LABEL: GROUP, ROLE_LABEL: "member"}
        ):
            assert lease.metadata is not None and lease.metadata.name is not None
            found.add(lease.metadata.name)
        return found

    live = {member_lease_name(GROUP, i) for i in ("replica-a", "replica-b")}
    async with replicas(kube_client, namespace, "replica-a", "replica-b", settings=quick):
        await eventually(
            lambda: _true(_logged(caplog, "deleted stale member lease")),
            PATIENCE + STALE_MEMBER_LEASES * quick.lease_duration,
            "a stale member lease deleted",
        )

        async def only_live() -> set[str] | None:
            found = await members()
            return found if found == live else None

        # both stale Leases go, and by then the live replicas have renewed theirs for
        # more than STALE_MEMBER_LEASES lease durations: they are kept
        assert await eventually(only_live, PATIENCE, f"only {sorted(live)} left") == live
        deleted = [r for r in caplog.records if r.getMessage() == "deleted stale member lease"]
        assert {r.lease for r in deleted} == {member_lease_name(GROUP, i) for i in left}
        assert {r.holder for r in deleted} == {"gone-killed", ""}


async def test_a_live_member_that_leaves_its_shards_free_loses_them_only_after_its_turns_and_as_a_fallback(
    kube_client: AsyncClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The test plays a member that never takes a shard: its member Lease (of 60 s, so
    live throughout) is renewed only when the test says. Its shards stay free while it
    has no turn, however long (a member slow to act is not passed over); after
    `FALLBACK_AFTER_TURNS` renewals seen, replica-a takes them as a fallback (annotated,
    left out of the placement: none of replica-a's own shards moves); once the member is
    gone, they are replica-a's own and the annotation goes, with no shard changing hands."""
    caplog.set_level(logging.INFO, logger="ome_routing.kube.sharding")
    ghost = "replica-ghost"
    name = member_lease_name(GROUP, ghost)
    await kube_client.create(
        Lease(
            metadata=ObjectMeta(
                name=name,
                namespace=namespace,
                labels={GROUP_LABEL: GROUP, ROLE_LABEL: "member", COUNT_LABEL: str(SHARDS)},
            ),
            spec=LeaseSpec(
                holderIdentity=ghost, leaseDurationSeconds=60, renewTime=datetime.now(UTC)
            ),
        )
    )

    async def renew_ghost() -> None:
        lease = await kube_client.get(Lease, name, namespace=namespace)
        assert lease.spec is not None
        lease.spec.renewTime = datetime.now(UTC)
        await kube_client.replace(lease)

    async def turns_of_a(count: int) -> None:
        """Wait until replica-a has renewed its member Lease `count` more times (each
        renewal comes after a list: the second one seen has listed what came before)."""

        async def renewed() -> datetime:
            lease = await kube_client.get(
                Lease, member_lease_name(GROUP, "replica-a"), namespace=namespace
            )
            assert lease.spec is not None and lease.spec.renewTime is not None
            return lease.spec.renewTime

        seen = [await renewed()]

        async def more() -> bool:
            now = await renewed()
            if now != seen[-1]:
                seen.append(now)
            return len(seen) > count

        await eventually(more, PATIENCE, f"{count} more turns of replica-a")

    async with (
        LeaseHistory(kube_client, namespace) as history,
        replicas(kube_client, namespace, "replica-a") as fleet,
    ):
        a = fleet["replica-a"]

        async def at_rest() -> set[int] | None:
            states = await shard_states(kube_client, namespace)
            mine = {s for s, (holder, _) in states.items() if holder == "replica-a"}
            want = assign(SHARDS, ["replica-a", ghost], dict.fromkeys(mine, "replica-a"))
            own = {s for s, m in want.items() if m == "replica-a"}
            return mine if mine == own and a.writable() == own else None

        own = await eventually(at_rest, PATIENCE, "replica-a holding its own shards")
        await history.caught_up()
        ghosts = set(range(SHARDS)) - own
        assert ghosts, own  # the member is preferred for some shards
        seen = {s: len(history.by_shard.get(s, [])) for s in range(SHARDS)}

        # free for three lease durations, with no turn of the member: not taken
        await asyncio.sleep(3 * SETTINGS.lease_duration)
        await turns_of_a(2)
        states = await shard_states(kube_client, namespace)
        assert {s for s, (h, _) in states.items() if h} == own, states
        assert a.gauge("ome_routing_shards_unowned") == len(ghosts)

        # its turns: one short of the count, then the last
        for _ in range(FALLBACK_AFTER_TURNS - 1):
            await renew_ghost()
            await turns_of_a(2)
        states = await shard_states(kube_client, namespace)
        assert {s for s, (h, _) in states.items() if h} == own, states
        await renew_ghost()

        async def fallen_back() -> dict[int, tuple[str | None, bool]] | None:
            found = await shard_states(kube_client, namespace)
            held = {s for s, (holder, _) in found.items() if holder == "replica-a"}
            return found if held == set(range(SHARDS)) else None

        await eventually(fallen_back, PATIENCE, "every shard held by replica-a")
        await turns_of_a(2)  # and so it stays, each fallback holding annotated
        await history.caught_up()
        states = await shard_states(kube_client, namespace)
        assert {s for s, (h, _) in states.items() if h == "replica-a"} == set(range(SHARDS))
        assert {s for s, (_, marked) in states.items() if marked} == ghosts, states
        assert a.writable() == set(range(SHARDS))
        # none of replica-a's own shards moved: renewed throughout, never released
        assert kept_their_holders(history, dict.fromkeys(own, "replica-a"), seen, own)
        for shard in ghosts:  # created by its fallback holder: no other holder before
            assert history.holders(shard) == ["replica-a"], history.holders(shard)
        # and its log says which it took as a fallback
        acquired = {
            r.__dict__["shard"]: r.__dict__["fallback"]
            for r in caplog.records
            if r.getMessage() == "acquired shard"
        }
        assert acquired == {s: s in ghosts for s in range(SHARDS)}, acquired

        # the member gone: the fallback holdings become replica-a's own, in place
        taken = {s: len(history.by_shard.get(s, [])) for s in range(SHARDS)}
        await kube_client.delete(Lease, name, namespace=namespace)

        async def unmarked() -> bool:
            found = await shard_states(kube_client, namespace)
            mine = {s for s, (h, marked) in found.items() if h == "replica-a" and not marked}
            return mine == set(range(SHARDS))

        await eventually(unmarked, PATIENCE, "no fallback annotation left")
        await history.caught_up()
        everything = set(range(SHARDS))
        assert kept_their_holders(
            history, dict.fromkeys(everything, "replica-a"), taken, everything
        )
        assert a.gauge("ome_routing_shards_unowned") == 0


class CountedLists(ShardSet):
    """A `ShardSet` that counts its turns' lists, each once it is in: before the turn
    notes what it listed (the same step of the event loop)."""

    lists = 0

    async def _list(self) -> list[Lease]:
        listed = await super()._list()
        self.lists += 1
        return listed


async def test_a_replica_sees_another_replicas_renewals_as_they_are_written_between_its_lists(
    kube_client: AsyncClient, namespace: str
) -> None:
    """Each replica watches the group's Leases, so another replica's renewal restarts that
    Lease's clock in its view when it is written, not at its own next list. A replica
    with slow turns (a 10 s retry period: it lists at another's expiry in its view, about
    every 4 s) sees the renewals of one that renews every 0.5 to 1.1 s between its lists."""
    slow = ElectionSettings(lease_duration=40.0, renew_deadline=30.0, retry_period=10.0)
    member = member_lease_name(GROUP, "replica-a")
    async with replicas(kube_client, namespace, "replica-a"):
        watcher = CountedLists(
            kube_client,
            namespace=namespace,
            group=GROUP,
            identity="replica-w",
            shards=SHARDS,
            settings=slow,
        )
        task = asyncio.create_task(watcher.run(), name="replica-w")
        try:

            def seen() -> tuple[int, datetime | None]:
                observed = watcher._observed.get(member)
                return watcher.lists, observed.renew_time if observed is not None else None

            await eventually(
                lambda: _true(seen()[1] is not None), PATIENCE, "the watcher's first list"
            )
            between_lists: list[datetime | None] = []
            last = seen()
            loop = asyncio.get_running_loop()
            until = loop.time() + PATIENCE
            while len(between_lists) < 3 and loop.time() < until:
                await asyncio.sleep(0.02)
                now = seen()
                if now[0] == last[0] and now[1] != last[1]:
                    between_lists.append(now[1])
                last = now
            assert len(between_lists) >= 3, (between_lists, watcher.lists)
            lease = await kube_client.get(Lease, member, namespace=namespace)
            assert lease.spec is not None and lease.spec.renewTime is not None
            assert max(t for t in between_lists if t) <= lease.spec.renewTime
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
