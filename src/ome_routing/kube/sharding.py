"""Sharding (ours, off by default): routed services split into virtual shards, each
shard with a `coordination.k8s.io/v1` Lease of its own and exactly one writer.

With `--sharding`, replicas do not elect one leader. Each replica holds a *member* Lease
(`<lease-name>-member-<hash of identity>`) that says it is alive, and the key space (the
routed InferenceServices, by namespace and name) is split into `--shards` virtual shards
(`core.shards.shard_of`), each with its own Lease (`<lease-name>-shard-<NN>`). Replicas
place the shards with a sticky balanced assignment over the live members and the shards'
live holders (`core.shards.assign`): a shard keeps its holder unless the balance needs
it elsewhere, so a replica that leaves moves only its own shards and one that joins takes
only its share. A holder releases a shard only after its preferred owner is alive, so a
shard is never written by two replicas and never unowned for longer than a Lease
duration plus a retry.

**The gate, per shard.** A `ShardLease` is one tenure of one shard: it is the shard's
write gate exactly as `LeaderElector` is the leader's (`kube.leader`): a write may be
sent while the tenure is inside its renew deadline, measured on `time.monotonic()` from
the moment its last successful renewal was sent, and it gets the renew margin as its
total deadline. A tenure that has ended (lost, expired, handed over) refuses every write
and every read for ever; a new acquisition of the same shard is a new `ShardLease`.

Which shard a request is for is carried by the context: `writing_for(lease)` sets
`WRITING_FOR` around a reconcile (asyncio tasks copy the context they are created in, so
the requests of everything the reconcile starts carry it too), and `ShardGate`, the
`WriteGate` of the replica's one `FencedClient`, asks that tenure. A write with no
tenure in its context is refused: in sharded mode every write belongs to a key.

**The Leases (`ShardSet`).** One loop per replica, every retry period jittered as the
elector's (`kube.leader.jittered`), or sooner, just after the first expiry of another
replica's Lease in its view (`next_turn_in`): renew the member Lease (create it when missing);
list the group's Leases by label, in one call; judge each Lease's liveness on this
replica's own monotonic clock from when it last saw its holder or renewTime change (as
`kube.leader.lease_is_free`, so clock skew between replicas does not matter), seen as it
is written: a watch of the group's Leases (`kube.watching.Informer`) notes every change
between turns too, so another replica's Lease expires in this view a lease duration after
its last renewal, not after the next list that showed it (a list answered later than the
watch's newer version changes nothing; a watch that fails lists again, and meanwhile the
turns' lists keep the view as before); assign
the shards over the live members and itself, given each shard's live holder
(`core.shards.assign`: every replica that lists the same Leases gets the same answer,
and a shard released on its way to its new member is still sent to that member, so a
handover completes); then, concurrently
(at most `CONCURRENT_REQUESTS` at once):

- renew each held shard with the resourceVersion it read; a conflict, another holder in
  the list, or the renew deadline passing ends the tenure as a **loss** (the gate shut
  first, then `on_lost` awaited, the Lease left alone);
- **hand over** each held shard whose preferred member is another live member:
  `on_lost` awaited with the gate open (reconciles in flight finish their writes), the
  gate shut, the Lease released (no holder), so the preferred member takes it on its
  next turn and a watch on the Lease sees holder, no holder, new holder;
- acquire each free shard it is preferred for (create the Lease when missing, else
  replace with the resourceVersion read), and, as a **fallback**, a shard free in its
  view for a whole lease duration even if not preferred, once the preferred member has
  had a whole turn with it free and not taken it (`FALLBACK_AFTER_TURNS` renewals of
  its member Lease seen since: a member that cannot take it, as one whose grant does not
  name the shard's Lease, must not leave it unowned, and one slow to act is not passed
  over). A fallback holding carries `FALLBACK_ANNOTATION`, which every replica leaves
  out of `assign` (it displaces none of the holder's own shards), and is kept
  `FALLBACK_HOLD_LEASES` lease durations before it is handed over again; once `assign`
  gives it to its holder, the next renewal drops the annotation.

The renewals (each held shard's, the member Lease's) go on the replica's own transport
(`kube.lease_wire`) where its kubeconfig allows, at a sixth of the client's CPU; every
other request of the loop is lightkube's. A tenure's deadline counts from when the
acquisition or renewal was *sent*; a task of
its own ends each tenure at its deadline, whatever the loop is waiting for. On
cancellation of `run`, each held shard is handed back as on a handover (released),
then the member Lease is released, each step bounded in time.

**Coverage.** A shard with no live holder in this replica's view is unowned from when
it became so (its holder's Lease expired, or it was seen released or missing); the
gauges `ome_routing_shards_held`, `ome_routing_shards_unowned` and
`ome_routing_shard_members` say what the replica sees, `ome_routing_shard_transitions_total`
counts tenures `acquired`, `handed_over`, `lost` and `released`. A shard unowned longer
than the lease duration plus two retry periods is logged (`shard unowned`, once a spell,
by every replica that sees it) and gets an `events.k8s.io/v1` Event on its Lease (reason
`ShardUnowned`, once a spell, by the replica `assign` prefers for it).

Errors: every API failure of the loop (refused, conflict, forbidden, the API server
away) is logged at debug and retried on the next turn; the deadlines decide what it
costs. A subscriber that raises or outlasts `ON_LOST_GRACE_SECONDS` is logged; `run`
ends only when cancelled (or abandoned, a test's stand-in for SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import random
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.events_v1 import Event

from ome_routing.core.durations import Duration
from ome_routing.core.shards import assign, member_lease_name, shard_lease_name, shard_of
from ome_routing.kube.fencing import NotLeader
from ome_routing.kube.leader import (
    ElectionSettings,
    Observation,
    jittered,
    lease_is_free,
    mark_released,
    micro_now,
    release_lease,
)
from ome_routing.kube.lease_wire import LeaseWire
from ome_routing.kube.resources import fenced_delete
from ome_routing.kube.watching import Informer, ObjectKey, RawObject
from ome_routing.metrics import RoutingMetrics

log = logging.getLogger(__name__)

#: the shard tenure the requests of the running task are made for (None: no shard)
WRITING_FOR: contextvars.ContextVar[ShardLease | None] = contextvars.ContextVar(
    "ome_routing_writing_for", default=None
)


class ShardLease:
    """One tenure of one shard by this replica: its write gate (see the module docstring).

    The `ShardSet` that holds it calls `renewed(sent_at)` after each successful renewal
    (the monotonic time the renewal was *sent*) and `end(reason)` when the tenure ends.
    """

    def __init__(
        self,
        shard: int,
        settings: ElectionSettings,
        renewed_at: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_expired: Callable[[ShardLease], None] | None = None,
    ) -> None:
        self.shard = shard
        self._settings = settings
        self._clock = clock
        self._renewed_at = renewed_at
        self._ended = False
        self.end_reason = ""
        self._on_expired = on_expired

    @property
    def ended(self) -> bool:
        return self._ended

    def renewed(self, sent_at: float) -> None:
        if not self._ended:
            self._renewed_at = max(self._renewed_at, sent_at)

    def may_write(self) -> bool:
        """Whether a write may be sent now: the tenure holds and is inside its deadline."""
        return not self._ended and self._clock() - self._renewed_at < self._settings.renew_deadline

    def end(self, reason: str) -> None:
        """Shut the gate for good (idempotent)."""
        if self._ended:
            return
        self._ended = True
        self.end_reason = reason
        log.info("shard tenure ended", extra={"shard": self.shard, "reason": reason})

    def check_write(self, request: str) -> float:
        """The gate: the seconds the write may take (the renew margin), or `NotLeader`."""
        if self.may_write():
            return self._settings.lease_duration - self._settings.renew_deadline
        if not self._ended:
            self.end(f"renew deadline passed before {request}")
            if self._on_expired is not None:
                self._on_expired(self)
        raise NotLeader(f"{request}: shard {self.shard} is not held")

    def check_read(self, request: str) -> None:
        if self._ended:
            raise NotLeader(f"{request}: shard {self.shard} is not held")


class ShardGate:
    """The `WriteGate` of a sharded replica's `FencedClient`: asks the tenure in the context.

    Reads with no tenure (the caches' lists and watches) pass; writes with none are refused.
    """

    def check_write(self, request: str) -> float:
        lease = WRITING_FOR.get()
        if lease is None:
            raise NotLeader(f"{request}: no shard tenure in this request's context")
        return lease.check_write(request)

    def check_read(self, request: str) -> None:
        lease = WRITING_FOR.get()
        if lease is not None:
            lease.check_read(request)


@contextlib.contextmanager
def writing_for(lease: ShardLease | None) -> Iterator[None]:
    """Run the block (and the tasks it creates) with its requests fenced by `lease`."""
    token = WRITING_FOR.set(lease)
    try:
        yield
    finally:
        WRITING_FOR.reset(token)


# --- the shard Leases ---------------------------------------------------------------------

#: the labels of a shard group's Leases (ours)
GROUP_LABEL = "routing.ome-routing.io/shard-group"
ROLE_LABEL = "routing.ome-routing.io/shard-role"
SHARD_LABEL = "routing.ome-routing.io/shard"
#: the shard count (`--shards`) of the replica that wrote a Lease: replicas of one group
#: with different counts split the keys differently, so one never works beside the other
COUNT_LABEL = "routing.ome-routing.io/shard-count"
#: on a shard Lease taken as a fallback (its preferred member left it free): every replica
#: leaves such a holding out of `assign`, so it displaces no member's own shards
FALLBACK_ANNOTATION = "routing.ome-routing.io/shard-fallback"
#: how long a subscriber's `on_lost` may take (`kube.controller.WRITE_GRACE_SECONDS`)
ON_LOST_GRACE_SECONDS = 5.0
#: shard Lease requests (and coverage Events) one replica sends at once
CONCURRENT_REQUESTS = 8
#: a shard taken because its preferred member left it free for a lease duration is kept
#: this many lease durations before it is handed over again (no ping-pong with a member
#: that cannot take it, as one whose grant does not name the shard's Lease)
FALLBACK_HOLD_LEASES = 10
#: ... and only once that member has renewed its member Lease this many times since the
#: shard was seen free: it had a whole turn with the shard free and did not take it (a
#: member slow to act, as on a loaded node, is not passed over)
FALLBACK_AFTER_TURNS = 3
#: a turn comes this long after the first expiry of another replica's Lease in this
#: replica's view, when that is sooner than the next retry period (a killed replica's
#: shards are taken as soon as its Leases expire, not up to a retry period later)
EXPIRY_MARGIN_SECONDS = 0.05
#: a member Lease of another replica that stays unrenewed (or released) this many lease
#: durations in this replica's view is deleted: its replica is gone for good (a pod of a
#: Deployment comes back under a new name, so a new member Lease), and the group's list
#: would otherwise grow by one Lease a pod for ever
STALE_MEMBER_LEASES = 10
#: tries of the member Lease's release at shutdown: a renewal cut short by the stop may
#: still be written after the release read the Lease (409), so it reads it again; an
#: unreleased member Lease would keep the others preferring this replica for a lease
#: duration, its shards free and untaken meanwhile
MEMBER_RELEASE_TRIES = 3
#: writes of a shard Lease's release in all: the first with the version this replica last
#: wrote; a renewal cut short by the stop may have been written since (409), so the next
#: read the Lease again; an unreleased shard waits a lease duration for its next holder
SHARD_RELEASE_TRIES = 3
#: the coverage Event (ours): reason, action, and who reports it
UNOWNED_REASON = "ShardUnowned"
UNOWNED_ACTION = "Acquire"
REPORTING_CONTROLLER = "routing.ome-routing.io/shard-leases"


#: what `assign` was given: the live members and the (shard, live holder) pairs
_Inputs = tuple[frozenset[str], frozenset[tuple[int, str]]]


class ShardSet:
    """The shard Leases one replica holds, and its member Lease; see `run`."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        group: str,
        identity: str,
        shards: int = 64,
        settings: ElectionSettings | None = None,
        metrics: RoutingMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if shards < 1:
            raise ValueError(f"shards must be at least 1, got {shards}")
        self._kube = client
        self._namespace = namespace
        self._group = group
        self.identity = identity
        self.shards = shards
        self._settings = settings or ElectionSettings()
        self._metrics = metrics
        self._clock = clock
        self._draw = draw
        self._member_name = member_lease_name(group, identity)
        self.instance = f"{REPORTING_CONTROLLER}-{socket.gethostname()}"
        #: the live tenures, by shard
        self._tenures: dict[int, ShardLease] = {}
        #: shards whose tenure is ending (on_lost awaited, release on its way): left alone
        self._ending: set[int] = set()
        #: each shard Lease as this replica's last write of it left it
        self._mine: dict[int, Lease] = {}
        #: every Lease of the group as last seen, by name, on this replica's clock
        self._observed: dict[str, Observation] = {}
        #: the newest resourceVersion seen of each Lease of the group, by name
        self._versions: dict[str, int] = {}
        #: a watch of the group's Leases: each renewal is seen as it is written
        self._leases = Informer(
            client,
            Lease,
            self._seen,
            namespaced=True,
            namespace=namespace,
            labels={GROUP_LABEL: group},
        )
        #: when (monotonic) each shard with no live holder became so, in this replica's view
        self._unowned_since: dict[int, float] = {}
        #: shards taken although another member was preferred: not handed over before then
        self._kept: dict[int, float] = {}
        #: how many times each Lease of the group was seen changed (its holder or renewTime)
        self._changes: dict[str, int] = {}
        #: each free shard's preferred member and that member's Lease changes when this
        #: replica began waiting for it to take the shard
        self._waiting_for: dict[int, tuple[str, int]] = {}
        self._logged_unowned: set[int] = set()
        self._reported_unowned: set[int] = set()
        self._member_renewed_at = float("-inf")
        #: when (monotonic) the first Lease another replica holds expires in this view
        self._next_expiry = math.inf
        #: the last answer of `assign`, with the live members and holders it was given
        self._assigned: tuple[_Inputs, dict[int, str]] = ((frozenset(), frozenset()), {})
        self._on_acquired: list[Callable[[ShardLease], None]] = []
        self._on_lost: list[Callable[[int], Awaitable[None]]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._requests = asyncio.Semaphore(CONCURRENT_REQUESTS)
        self._task: asyncio.Task[Any] | None = None
        #: the renewals' own transport (`kube.lease_wire`), from `run` on; None: the client's
        self._wire: LeaseWire | None = None
        self._abandoned = False
        self._foreign_warned = False

    # --- what the controller asks ----------------------------------------------------

    def tenure_for(self, namespace: str, name: str) -> ShardLease | None:
        """The live tenure of the shard of `namespace/name`, or None (not ours)."""
        return self.holding(shard_of(namespace, name, self.shards))

    def holding(self, shard: int) -> ShardLease | None:
        tenure = self._tenures.get(shard)
        return tenure if tenure is not None and not tenure.ended else None

    def held(self) -> frozenset[int]:
        return frozenset(shard for shard, tenure in self._tenures.items() if not tenure.ended)

    def subscribe(
        self,
        on_acquired: Callable[[ShardLease], None],
        on_lost: Callable[[int], Awaitable[None]],
    ) -> None:
        """Be told of every tenure begun (`on_acquired`, at once) and ended (`on_lost`,
        awaited: with the gate open on a handover or shutdown, shut on a loss); call
        before `run`. `on_lost` must return within `ON_LOST_GRACE_SECONDS`."""
        self._on_acquired.append(on_acquired)
        self._on_lost.append(on_lost)

    def answering(self) -> bool:
        """Whether the member Lease was renewed within the renew deadline (readiness)."""
        return self._clock() - self._member_renewed_at < self._settings.renew_deadline

    def abandon(self) -> None:
        """Stop at once without a further request, the Leases left as they are: what a
        replica killed (SIGKILL) leaves behind. For tests; `run` ends cancelled."""
        self._abandoned = True
        for tenure in self._tenures.values():
            tenure.end("abandoned")
        if self._task is not None:
            self._task.cancel()

    # --- running -----------------------------------------------------------------------

    async def run(self) -> None:
        """One turn every retry period (jittered, or sooner: `next_turn_in`) until
        cancelled; on cancellation each held shard is handed back (`on_lost` awaited with
        the gate open, then the gate shut and the Lease released), then the member Lease,
        within about 3 x `ON_LOST_GRACE_SECONDS`."""
        self._task = asyncio.current_task()
        self._wire, why = LeaseWire.of(self._kube)
        if self._wire is None:
            log.info("renewing leases through the Kubernetes client", extra={"reason": why})
        deadlines = asyncio.create_task(self._keep_deadlines(), name="shard deadlines")
        watch = asyncio.create_task(self._leases.run(), name="shard lease watch")
        try:
            while True:
                await self._turn()
                self._wake.clear()
                pause = next_turn_in(
                    jittered(self._settings.retry_period, self._draw()),
                    self._next_expiry - self._clock(),
                )
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pause):
                        await self._wake.wait()
        finally:
            deadlines.cancel()
            watch.cancel()
            if self._wire is not None:  # no renewal is in flight now; releases are the client's
                self._wire.close()
            if self._abandoned:
                for task in self._background:
                    task.cancel()
            else:
                stopping = asyncio.ensure_future(self._shutdown())
                try:
                    await asyncio.shield(stopping)
                except asyncio.CancelledError:
                    await stopping
                    raise

    async def _keep_deadlines(self) -> None:
        """End each tenure at its renew deadline, whatever the turn is waiting for."""
        while True:
            self._lose_expired()
            deadline = self._settings.renew_deadline
            due = min(
                (t._renewed_at + deadline for t in self._tenures.values()),
                default=self._clock() + self._settings.retry_period,
            )
            await asyncio.sleep(max(0.01, due - self._clock()))

    async def _list(self) -> list[Lease]:
        """The group's Leases: one list call, bounded by the renew deadline."""
        async with asyncio.timeout(self._settings.renew_deadline):
            return [
                lease
                async for lease in self._kube.list(
                    Lease, namespace=self._namespace, labels={GROUP_LABEL: self._group}
                )
            ]

    async def _turn(self) -> None:
        self._lose_expired()
        try:
            listed = await self._list()
        except Exception as err:  # the API server away: the deadlines decide
            log.debug("listing shard leases: %s", err)
            self._lose_expired()
            self._count()
            return
        now = self._clock()
        members: dict[str, Lease] = {}
        shard_leases: dict[int, Lease] = {}
        for lease in listed:
            meta = lease.metadata or ObjectMeta()
            name, labels = meta.name or "", meta.labels or {}
            self._observe(name, lease, now)
            if labels.get(ROLE_LABEL) == "member":
                members[name] = lease
            elif labels.get(ROLE_LABEL) == "shard":
                shard = _shard_number(labels.get(SHARD_LABEL))
                if shard is not None and name == shard_lease_name(self._group, shard):
                    shard_leases[shard] = lease
        self._next_expiry = self._first_expiry(listed, now)
        live = {self.identity}
        for name, member in members.items():
            holder = self._live_holder(name, member, now)
            if holder and self._same_count(member):
                live.add(holder)
        # a live Lease of a replica with another shard count: that replica splits the keys
        # differently, so this one takes nothing while it holds any (a rolling update of
        # `--shards` goes on once the old replicas are gone), and if both hold some (they
        # started together), the smaller count yields; a live leader of the group's name
        # (a rollout turning sharding on or off) counts as another count that always wins
        foreign = self._foreign_counts(listed, now)
        if await self._leader_lives(now):
            foreign.add(0)  # a leader of the group's name (sharding off): it writes every key
        if foreign and not self._foreign_warned:
            log.warning(
                "keys held by a leader or by replicas with another shard count",
                extra={"shards": self.shards, "others": sorted(foreign)},
            )
        self._foreign_warned = bool(foreign)
        if foreign and (0 in foreign or max(foreign) > self.shards):
            for shard in list(self._tenures):
                self._end(shard, "a leader or a replica with more shards holds keys", "handed_over")
        await self._renew_member(members.get(self._member_name))
        self._lose_expired()
        holders: dict[int, str] = {}
        for shard, listed_lease in shard_leases.items():
            holder = self._live_holder(shard_lease_name(self._group, shard), listed_lease, now)
            if holder and 0 <= shard < self.shards:
                holders[shard] = holder
        # a fallback holding is no one's in `assign` (every replica reads the annotation):
        # the shard stays its preferred member's, and the holder's own shards stay put
        placed = {s: h for s, h in holders.items() if not _is_fallback(shard_leases[s])}
        key = (frozenset(live), frozenset(placed.items()))
        if self._assigned[0] != key:  # the same members and holders: the same answer
            self._assigned = (key, assign(self.shards, live, placed))
        preferred = self._assigned[1]
        work: list[Awaitable[None]] = []
        unowned = 0
        for shard in range(self.shards):
            if shard in self._ending:
                continue
            found = shard_leases.get(shard)
            name = shard_lease_name(self._group, shard)
            holder = holders.get(shard)  # judged above, for `assign`
            tenure = self._tenures.get(shard)
            if tenure is not None:
                listed_holder = found.spec.holderIdentity if found and found.spec else None
                if found is None or listed_holder != self.identity:
                    self._end(shard, f"lease held by {listed_holder or 'no one'}", "lost")
                elif preferred[shard] != self.identity and self._kept.get(shard, now) <= now:
                    self._end(shard, f"handed over to {preferred[shard]}", "handed_over", found)
                else:
                    if preferred[shard] == self.identity:
                        self._kept.pop(shard, None)  # its own now: the renewal drops the mark
                    work.append(self._renew(shard, found, tenure))
                continue
            if holder and holder != self.identity:
                self._owned(shard)
                continue
            unowned += 1
            since = self._unowned_since.setdefault(shard, self._became_free(name, found, now))
            if foreign:
                pass  # another shard count holds keys: take nothing beside it
            elif preferred[shard] == self.identity:
                work.append(self._acquire(shard, found))
            elif self._passed_over(shard, preferred[shard]) and (
                now - since >= self._settings.lease_duration
            ):
                # its preferred member did not take it: this one keeps it for a while
                # rather than hand it back to a member that may not be able to take it
                hold = FALLBACK_HOLD_LEASES * self._settings.lease_duration
                work.append(self._acquire(shard, found, keep_until=now + hold))
            work.extend(self._coverage(shard, now - since, preferred[shard]))
        work.extend(self._prune(name, member, now) for name, member in self._stale(members, now))
        for result in await asyncio.gather(*work, return_exceptions=True):
            if isinstance(result, Exception):  # a fault of ours: the next turn goes on
                log.error("shard leases: %s", result, exc_info=result)
        if self._metrics is not None:
            self._metrics.shards_unowned.set(unowned)
            self._metrics.shard_members.set(len(live))
        self._count()

    # --- Leases seen --------------------------------------------------------------------

    def _seen(self, key: ObjectKey, _old: RawObject | None, new: RawObject | None) -> None:
        """A Lease of the group as the watch brings it (a deletion: the next list says).
        One this cannot read is left to the turns' lists, and the watch goes on."""
        if new is None:
            return
        try:
            lease = cast(Lease, Lease.from_dict(new))
            self._observe(key[1], lease, self._clock())
        except Exception as err:
            log.debug("watching shard leases: %s: %s", key[1], err)

    def _observe(self, name: str, lease: Lease, now: float) -> None:
        """Note the Lease as seen at `now`: a change of its holder or renewTime restarts
        its clock. A version older than one seen already (a list answered after the
        watch brought a renewal) changes nothing."""
        version = _version_number(lease)
        if version is not None:
            if version < self._versions.get(name, version):
                return
            self._versions[name] = version
        spec = lease.spec or LeaseSpec()
        holder, renew = spec.holderIdentity, spec.renewTime
        previous = self._observed.get(name)
        if previous is None or (previous.holder, previous.renew_time) != (holder, renew):
            self._observed[name] = Observation(holder, renew, now)
            self._changes[name] = self._changes.get(name, 0) + 1

    def _first_expiry(self, listed: list[Lease], now: float) -> float:
        """When (monotonic) the first of the listed Leases another replica holds expires
        in this replica's view unless renewed first; infinity when none will."""
        first = math.inf
        for lease in listed:
            name = (lease.metadata.name if lease.metadata else None) or ""
            expiry = self._expiry(name, lease)
            if expiry is not None and expiry > now and self._observed[name].holder != self.identity:
                first = min(first, expiry)
        return first

    def _passed_over(self, shard: int, preferred: str) -> bool:
        """Whether `preferred` has had a whole turn with `shard` free and not taken it: its
        member Lease renewed `FALLBACK_AFTER_TURNS` times since this replica began waiting
        (a turn lists, renews the member Lease, then acquires; the third renewal seen
        comes after a turn that listed the shard free and finished)."""
        name = member_lease_name(self._group, preferred)
        changes = self._changes.get(name, 0)
        waiting = self._waiting_for.get(shard)
        if waiting is None or waiting[0] != preferred:
            self._waiting_for[shard] = (preferred, changes)
            return False
        return changes - waiting[1] >= FALLBACK_AFTER_TURNS

    def _duration(self, lease: Lease | None) -> float:
        seconds = lease.spec.leaseDurationSeconds if lease is not None and lease.spec else None
        return float(seconds) if seconds else self._settings.lease_duration

    def _live_holder(self, name: str, lease: Lease | None, now: float) -> str | None:
        """The holder of the Lease if it renews it, judged on this replica's clock."""
        observed = self._observed.get(name)
        if lease is None or observed is None or not observed.holder:
            return None
        if lease_is_free(observed, "", now, self._duration(lease)):
            return None
        return observed.holder

    def _expiry(self, name: str, lease: Lease | None) -> float | None:
        """When (monotonic) the Lease's holder loses it in this replica's view unless it
        renews first; None when it has no holder (or is unknown)."""
        observed = self._observed.get(name)
        if lease is None or observed is None or not observed.holder:
            return None
        return observed.seen_change_at + self._duration(lease)

    def _became_free(self, name: str, lease: Lease | None, now: float) -> float:
        """When the shard's Lease became free in this replica's view (now, if unknown)."""
        expiry = self._expiry(name, lease)
        return now if expiry is None else min(now, expiry)

    def _owned(self, shard: int) -> None:
        self._unowned_since.pop(shard, None)
        self._waiting_for.pop(shard, None)
        self._logged_unowned.discard(shard)
        self._reported_unowned.discard(shard)

    def _same_count(self, lease: Lease) -> bool:
        labels = (lease.metadata.labels if lease.metadata else None) or {}
        return labels.get(COUNT_LABEL) == str(self.shards)

    def _label_count(self, lease: Lease) -> None:
        meta = lease.metadata or ObjectMeta()
        meta.labels = {**(meta.labels or {}), COUNT_LABEL: str(self.shards)}
        lease.metadata = meta

    async def _leader_lives(self, now: float) -> bool:
        """Whether the leader Lease of the group's name (`--lease-name` without
        `--sharding`: a replica writing every key) has a live holder, as a rollout that
        turns sharding on or off meets it. A Lease that cannot be read (none, no grant,
        the API server away) is no leader: this guard is for rollouts, the shard Leases
        are the fence."""
        try:
            async with asyncio.timeout(self._settings.renew_deadline):
                lease = await self._kube.get(Lease, self._group, namespace=self._namespace)
        except Exception as err:
            log.debug("reading leader lease %s: %s", self._group, _message(err))
            return False
        self._observe(self._group, lease, now)
        holder = self._live_holder(self._group, lease, now)
        return bool(holder) and holder != self.identity

    def _foreign_counts(self, listed: list[Lease], now: float) -> set[int]:
        """The shard counts of other replicas' live shard Leases that differ from ours
        (a Lease without the label counts as another count: -1)."""
        counts: set[int] = set()
        for lease in listed:
            meta = lease.metadata or ObjectMeta()
            labels = meta.labels or {}
            if labels.get(ROLE_LABEL) != "shard" or self._same_count(lease):
                continue
            holder = self._live_holder(meta.name or "", lease, now)
            if holder and holder != self.identity:
                count = labels.get(COUNT_LABEL, "")
                counts.add(int(count) if count.isdigit() else -1)
        return counts

    # --- tenures ------------------------------------------------------------------------

    def _lease(self, shard: int, holder: str | None, now: datetime) -> Lease:
        return Lease(
            metadata=ObjectMeta(
                name=shard_lease_name(self._group, shard),
                namespace=self._namespace,
                labels={
                    GROUP_LABEL: self._group,
                    ROLE_LABEL: "shard",
                    SHARD_LABEL: str(shard),
                    COUNT_LABEL: str(self.shards),
                },
            ),
            spec=LeaseSpec(
                holderIdentity=holder,
                leaseDurationSeconds=int(self._settings.lease_duration),
                acquireTime=now,
                renewTime=now,
                leaseTransitions=0,
            ),
        )

    async def _acquire(
        self, shard: int, lease: Lease | None, keep_until: float | None = None
    ) -> None:
        async with self._requests:
            if self._abandoned:
                return
            sent = self._clock()  # the deadline counts from here
            now_wall = micro_now()
            try:
                async with asyncio.timeout(self._settings.renew_deadline):
                    written = await self._take(shard, lease, now_wall, keep_until is not None)
            except Exception as err:  # taken first, refused, or the API server away
                log.debug("acquiring shard %s: %s", shard, _message(err))
                return
        self._begin(shard, sent, written, keep_until)

    async def _take(
        self, shard: int, lease: Lease | None, now_wall: datetime, fallback: bool
    ) -> Lease:
        if lease is None:
            lease = self._lease(shard, self.identity, now_wall)
            _mark_fallback(lease, fallback)
            return await self._kube.create(lease)
        _mark_fallback(lease, fallback)
        spec = lease.spec or LeaseSpec()
        had_holder = bool(spec.holderIdentity)
        spec.holderIdentity = self.identity
        spec.leaseDurationSeconds = int(self._settings.lease_duration)
        spec.acquireTime = now_wall
        spec.renewTime = now_wall
        spec.leaseTransitions = (spec.leaseTransitions or 0) + int(had_holder)
        lease.spec = spec
        self._label_count(lease)
        return await self._kube.replace(lease)  # with the version it read

    def _begin(self, shard: int, sent: float, written: Lease, keep_until: float | None) -> None:
        tenure = ShardLease(
            shard, self._settings, sent, clock=self._clock, on_expired=self._expired
        )
        self._tenures[shard] = tenure
        self._mine[shard] = written
        if keep_until is None:
            self._kept.pop(shard, None)
        else:
            self._kept[shard] = keep_until
        self._owned(shard)
        self._count()
        log.info(
            "acquired shard",
            extra={"shard": shard, "identity": self.identity, "fallback": keep_until is not None},
        )
        self._transition("acquired")
        for on_acquired in self._on_acquired:
            try:
                on_acquired(tenure)
            except Exception:
                log.exception("shard subscriber failed", extra={"shard": shard})

    async def _renew(self, shard: int, lease: Lease, tenure: ShardLease) -> None:
        async with self._requests:
            sent = self._clock()
            remaining = tenure._renewed_at + self._settings.renew_deadline - sent
            if remaining <= 0 or tenure.ended:
                self._end(shard, "renew deadline passed", "lost")
                return
            spec = lease.spec or LeaseSpec()
            spec.holderIdentity = self.identity
            spec.leaseDurationSeconds = int(self._settings.lease_duration)
            spec.renewTime = micro_now()
            lease.spec = spec
            _mark_fallback(lease, shard in self._kept)
            try:
                async with asyncio.timeout(remaining):
                    written = await self._renewal(lease)
            except TimeoutError:
                self._end(shard, "failed to renew in time", "lost")
                return
            except ApiError as err:
                if err.status.code == 409:
                    self._end(shard, f"conflict: {err.status.message}", "lost")
                else:
                    log.debug("renewing shard %s: %s", shard, err.status.message)
                return
            except Exception as err:  # the API server away: the deadline decides
                log.debug("renewing shard %s: %s", shard, err)
                return
        if self._tenures.get(shard) is tenure:
            self._mine[shard] = written
            tenure.renewed(sent)

    async def _renewal(self, lease: Lease) -> Lease:
        """A renewal's write: on the replica's own transport where it has one (`run`)."""
        if self._wire is not None:
            return await self._wire.replace(lease)
        return await self._kube.replace(lease)

    def _expired(self, _tenure: ShardLease) -> None:
        """A write found its tenure past the deadline: the next turn comes at once."""
        self._wake.set()

    def _lose_expired(self) -> None:
        for shard, tenure in list(self._tenures.items()):
            if tenure.ended or not tenure.may_write():
                self._end(shard, tenure.end_reason or "renew deadline passed", "lost")

    def _end(self, shard: int, reason: str, how: str, lease: Lease | None = None) -> None:
        """End a tenure in the background: a loss at once, a handover after `on_lost`."""
        tenure = self._tenures.pop(shard, None)
        if tenure is None:
            return
        self._ending.add(shard)
        if how == "lost":
            tenure.end(reason)
        self._count()
        task = asyncio.create_task(self._ending_tenure(shard, tenure, reason, how, lease))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _ending_tenure(
        self, shard: int, tenure: ShardLease, reason: str, how: str, lease: Lease | None
    ) -> None:
        try:
            await self._tell_lost(shard)
            tenure.end(reason)
            if how == "lost":
                log.warning(
                    "lost shard",
                    extra={"shard": shard, "identity": self.identity, "reason": reason},
                )
            else:
                await self._release(shard, lease)
                log.info(
                    "handed over shard" if how == "handed_over" else "released shard",
                    extra={"shard": shard, "identity": self.identity, "reason": reason},
                )
            self._transition(how)
        finally:
            self._ending.discard(shard)
            self._mine.pop(shard, None)
            self._count()

    async def _tell_lost(self, shard: int) -> None:
        if not self._on_lost:
            return
        told = [asyncio.ensure_future(on_lost(shard)) for on_lost in self._on_lost]
        done, pending = await asyncio.wait(told, timeout=ON_LOST_GRACE_SECONDS)
        for task in pending:
            task.cancel()
            log.error("shard subscriber did not return in time", extra={"shard": shard})
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.error(
                    "shard subscriber failed",
                    extra={"shard": shard, "error": str(task.exception())},
                )

    async def _release(self, shard: int, lease: Lease | None) -> None:
        """Give the shard's Lease up (no holder), with the version last read or written;
        on a conflict (written since: a renewal the stop cut short), read it again and
        give it up if this replica still holds it (`SHARD_RELEASE_TRIES` writes in all)."""
        lease = lease or self._mine.get(shard)
        if lease is None or not mark_released(lease, self.identity):
            return
        try:
            async with asyncio.timeout(ON_LOST_GRACE_SECONDS):
                try:
                    await self._kube.replace(lease)
                except ApiError as err:
                    if err.status.code != 409:
                        raise
                    log.debug("releasing shard %s: %s", shard, _message(err))
                    await release_lease(
                        self._kube,
                        self._namespace,
                        shard_lease_name(self._group, shard),
                        self.identity,
                        tries=SHARD_RELEASE_TRIES - 1,
                    )
        except Exception as err:  # best effort: the Lease expires anyway
            log.debug("releasing shard %s: %s", shard, _message(err))

    # --- the member Lease ---------------------------------------------------------------

    async def _renew_member(self, lease: Lease | None) -> None:
        sent = self._clock()
        now_wall = micro_now()
        try:
            async with asyncio.timeout(self._settings.renew_deadline):
                await self._write_member(lease, now_wall)
        except Exception as err:  # a conflict or the API server away: next turn
            log.debug("renewing member lease %s: %s", self._member_name, _message(err))
            return
        self._member_renewed_at = sent

    async def _write_member(self, lease: Lease | None, now_wall: datetime) -> None:
        if lease is None:
            await self._kube.create(
                Lease(
                    metadata=ObjectMeta(
                        name=self._member_name,
                        namespace=self._namespace,
                        labels={
                            GROUP_LABEL: self._group,
                            ROLE_LABEL: "member",
                            COUNT_LABEL: str(self.shards),
                        },
                    ),
                    spec=LeaseSpec(
                        holderIdentity=self.identity,
                        leaseDurationSeconds=int(self._settings.lease_duration),
                        acquireTime=now_wall,
                        renewTime=now_wall,
                        leaseTransitions=0,
                    ),
                )
            )
        else:
            spec = lease.spec or LeaseSpec()
            if spec.holderIdentity != self.identity:
                spec.acquireTime = now_wall
            spec.holderIdentity = self.identity
            spec.leaseDurationSeconds = int(self._settings.lease_duration)
            spec.renewTime = now_wall
            lease.spec = spec
            self._label_count(lease)
            await self._renewal(lease)

    def _stale(self, members: dict[str, Lease], now: float) -> list[tuple[str, Lease]]:
        """Other replicas' member Leases unchanged (not renewed, or released) for
        `STALE_MEMBER_LEASES` lease durations, judged on this replica's clock."""
        stale = []
        for name, lease in members.items():
            observed = self._observed.get(name)
            if name == self._member_name or observed is None:
                continue
            if now - observed.seen_change_at >= STALE_MEMBER_LEASES * self._duration(lease):
                stale.append((name, lease))
        return stale

    async def _prune(self, name: str, lease: Lease, now: float) -> None:
        """Delete a stale member Lease, on the preconditions of the version listed: a
        replica that renewed it since keeps it (409), and of the live replicas that try,
        one deletes it and the others find it gone (404)."""
        observed = self._observed.pop(name, None)
        self._changes.pop(name, None)
        self._versions.pop(name, None)
        idle = now - observed.seen_change_at if observed is not None else 0.0
        meta = lease.metadata or ObjectMeta()
        async with self._requests:
            try:
                async with asyncio.timeout(self._settings.renew_deadline):
                    await fenced_delete(
                        self._kube,
                        Lease,
                        self._namespace,
                        name,
                        uid=meta.uid or "",
                        resource_version=meta.resourceVersion or "",
                    )
            except Exception as err:  # gone already, no grant, or the API server away
                log.debug("deleting stale member lease %s: %s", name, _message(err))
                return
        holder = lease.spec.holderIdentity if lease.spec else None
        log.info(
            "deleted stale member lease",
            extra={"lease": name, "holder": holder or "", "unrenewed": _duration(idle)},
        )

    async def _release_member(self) -> None:
        await release_lease(
            self._kube,
            self._namespace,
            self._member_name,
            self.identity,
            tries=MEMBER_RELEASE_TRIES,
        )

    async def _shutdown(self) -> None:
        """Release the member Lease, then hand every held shard back: a member release's
        time, then at most `on_lost`'s grace and a release's (`ON_LOST_GRACE_SECONDS`
        each). The member Lease goes first so that the others stop preferring this
        replica at once and take each shard as soon as it is released."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ON_LOST_GRACE_SECONDS):
                await self._release_member()
        for shard in list(self._tenures):
            self._end(shard, "shutting down", "released")
        if self._background:
            await asyncio.wait(set(self._background), timeout=2 * ON_LOST_GRACE_SECONDS)

    # --- coverage -----------------------------------------------------------------------

    def _coverage(self, shard: int, unowned_for: float, preferred: str) -> list[Awaitable[None]]:
        """The warning (every replica, once a spell) and the Event (the preferred
        replica, once a spell) for a shard unowned past the bound."""
        settings = self._settings
        bound = settings.lease_duration + 2 * settings.retry_period
        if unowned_for <= bound:
            return []
        if shard not in self._logged_unowned:
            self._logged_unowned.add(shard)
            log.warning("shard unowned", extra={"shard": shard, "seconds": round(unowned_for, 1)})
        if preferred != self.identity or shard in self._reported_unowned:
            return []
        self._reported_unowned.add(shard)
        return [self._report_unowned(shard, unowned_for, bound)]

    async def _report_unowned(self, shard: int, unowned_for: float, bound: float) -> None:
        name = shard_lease_name(self._group, shard)
        now = datetime.now(UTC)
        regarding: dict[str, str] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "namespace": self._namespace,
            "name": name,
        }
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # client-go's `GenerateEventName`
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": self._namespace},
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.instance[:128],
            "action": UNOWNED_ACTION,
            "reason": UNOWNED_REASON,
            "type": "Warning",
            "note": (
                f"shard {shard} of {self._group} has had no live holder for "
                f"{_duration(unowned_for)} (bound {_duration(bound)})"
            ),
            "regarding": regarding,
        }
        async with self._requests:
            try:
                async with asyncio.timeout(self._settings.renew_deadline):
                    await self._kube.create(cast(Event, Event.from_dict(body)))
            except Exception as err:  # the warning was logged; the Event is best effort
                log.debug("shard %s: event not written: %s", shard, _message(err))

    # --- metrics ------------------------------------------------------------------------

    def _count(self) -> None:
        if self._metrics is not None:
            self._metrics.shards_held.set(len(self.held()))

    def _transition(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.shard_transitions.labels(reason=reason).inc()


def _duration(seconds: float) -> str:
    """Go's formatting of a duration, to the tenth of a second."""
    return str(Duration.of_seconds(round(seconds, 1)))


def next_turn_in(pause: float, until_expiry: float) -> float:
    """The wait before the next turn: the jittered retry period `pause`, or, when the
    first expiry of another replica's Lease comes sooner (`until_expiry` seconds from
    now), just after it."""
    return min(pause, max(0.0, until_expiry) + EXPIRY_MARGIN_SECONDS)


def _is_fallback(lease: Lease) -> bool:
    """Whether the shard Lease says its holder took it as a fallback."""
    annotations = (lease.metadata.annotations if lease.metadata else None) or {}
    return FALLBACK_ANNOTATION in annotations


def _mark_fallback(lease: Lease, fallback: bool) -> None:
    """Set (`fallback`) or drop the fallback annotation of a shard Lease about to be
    written."""
    meta = lease.metadata or ObjectMeta()
    annotations = dict(meta.annotations or {})
    if fallback:
        annotations[FALLBACK_ANNOTATION] = "true"
    else:
        annotations.pop(FALLBACK_ANNOTATION, None)
    meta.annotations = annotations or None
    lease.metadata = meta


def _version_number(lease: Lease) -> int | None:
    """The Lease's resourceVersion as a number (etcd's are increasing integers), or None
    when it is not one: then every version counts as new."""
    version = lease.metadata.resourceVersion if lease.metadata else None
    return int(version) if version and version.isdigit() else None


def _shard_number(label: str | None) -> int | None:
    if label is None or not label.isdigit():
        return None
    return int(label)


def _message(err: Exception) -> str:
    return err.status.message or str(err) if isinstance(err, ApiError) else str(err)
