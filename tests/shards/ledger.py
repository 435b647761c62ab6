"""Who held which shard when, and who wrote which key when: the audit log set side by side.

`Ledger` reads the requests of the API server's audit log (`audit.Request`): the shard
Leases' writes give each shard's *tenures* (who held it, from the write that made it the
holder to the next write that named another holder or none), and the writes of the
objects a replica writes for a key (its TrafficMap, the publisher's route, Services and
slices) give, for each key and each writer, its *intervals*: the first to the last
successful write of that key within one tenure of its shard by that writer. What must hold:

- every write of a key is made inside a tenure of the key's shard by its writer
  (`outside_tenure`);
- the intervals of two writers of one key never overlap, and one follows another only
  with a gap (`overlaps`, `handover_gaps`);
- a shard's Lease never names a second holder before the first one's renewal has gone
  unrenewed for the lease duration, unless it was released in between (`holder_jumps`);
- how long each shard had no live holder (`unowned`).

Times are the API server's (`stageTimestamp`, wall clock): one clock for every request.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from audit import WATCHED, Request
from contract import shard_of

#: a write answered (by the API server) this long before the Lease's expiry still counts
#: as after it: a replica's read of the Lease can be served a moment before the write it
#: reads is stamped complete, and its lease duration counts from that read
STAMP_SLACK = 0.5


@dataclass
class Tenure:
    shard: int
    holder: str
    start: float  # the write that made `holder` the holder
    last: float  # its last write that kept it (a renewal)
    end: float | None = None  # the next write that named another holder or none
    released: bool = False  # ended by a release (no holder), not by a takeover

    def covers(self, moment: float) -> bool:
        return self.start <= moment and (self.end is None or moment < self.end)


@dataclass
class Interval:
    key: str
    writer: str
    #: None: the writer's writes of the key made with no tenure of its shard, all of them
    tenure: Tenure | None
    first: float
    last: float
    writes: int = 1


@dataclass
class Ledger:
    requests: list[Request]
    group: str
    shards: int
    #: the audit's source address of each replica -> its identity
    identities: Mapping[str, str]
    lease_duration: float
    tenures: dict[int, list[Tenure]] = field(default_factory=dict)
    intervals: dict[str, list[Interval]] = field(default_factory=dict)
    outside_tenure: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        name = re.compile(rf"{re.escape(self.group)}-shard-(\d+)")
        for request in self.requests:
            found = name.fullmatch(request.name) if request.kind == "Lease" else None
            if found and request.succeeded and request.holder is not None:
                self._lease_write(int(found.group(1)), request)
        owners: dict[tuple[str, str, str], str] = {}
        for request in self.requests:
            key = self._key(request, owners)
            if key is not None and request.succeeded:
                self._key_write(key, request)

    # -- building -----------------------------------------------------------------------

    def _lease_write(self, shard: int, request: Request) -> None:
        held = self.tenures.setdefault(shard, [])
        current = held[-1] if held and held[-1].end is None else None
        holder = request.holder or ""
        if current is not None and current.holder == holder:
            current.last = request.at
            return
        if current is not None:
            current.end = request.at
            current.released = not holder
        if holder:
            held.append(Tenure(shard, holder, request.at, request.at))

    def _key(self, request: Request, owners: dict[tuple[str, str, str], str]) -> str | None:
        if request.kind == "TrafficMap":
            return f"{request.namespace}/{request.name}"
        if request.kind not in WATCHED.values():
            return None
        ref = (request.kind, request.namespace, request.name)
        if request.owner:
            owners[ref] = request.owner
        return owners.get(ref)

    def _key_write(self, key: str, request: Request) -> None:
        writer = self.identities.get(request.source, request.source)
        namespace, name = key.split("/", 1)
        shard = shard_of(namespace, name, self.shards)
        tenure = next(
            (t for t in self.tenures.get(shard, []) if t.holder == writer and t.covers(request.at)),
            None,
        )
        if tenure is None:
            self.outside_tenure.append(
                f"{request} by {writer} at {request.at:.3f}: shard {shard} not held by it"
            )
        runs = self.intervals.setdefault(key, [])
        for run in runs:  # one interval per writer and tenure, whoever wrote in between
            if run.writer == writer and run.tenure is tenure:
                run.last = request.at
                run.writes += 1
                return
        runs.append(Interval(key, writer, tenure, request.at, request.at))

    # -- what tests ask -----------------------------------------------------------------

    def overlaps(self) -> list[str]:
        """Pairs of intervals of two writers of one key that overlap in time."""
        found = []
        for key, runs in self.intervals.items():
            ordered = sorted(runs, key=lambda r: r.first)
            for index, run in enumerate(ordered):
                for later in ordered[index + 1 :]:
                    if later.first > run.last:
                        break
                    if later.writer != run.writer:
                        found.append(
                            f"{key}: {run.writer} wrote {run.first:.3f}..{run.last:.3f}, "
                            f"{later.writer} {later.first:.3f}..{later.last:.3f}"
                        )
        return found

    def handover_gaps(self) -> list[float]:
        """For each time a key's writes pass from one writer to another: the gap (s)."""
        gaps = []
        for runs in self.intervals.values():
            ordered = sorted(runs, key=lambda r: r.first)
            gaps.extend(
                later.first - run.last
                for run, later in itertools.pairwise(ordered)
                if later.writer != run.writer
            )
        return gaps

    def holder_jumps(self) -> list[str]:
        """A Lease that named a second holder while the first one's renewal was live."""
        found = []
        for shard, held in self.tenures.items():
            for before, after in itertools.pairwise(held):
                if before.released or before.end != after.start:
                    continue
                expiry = before.last + self.lease_duration
                if after.start < expiry - STAMP_SLACK:
                    found.append(
                        f"shard {shard}: {after.holder} took it at {after.start:.3f}, "
                        f"{expiry - after.start:.2f}s before {before.holder}'s renewal "
                        f"of {before.last:.3f} expired"
                    )
        return found

    def unowned(self, since: float, until: float) -> list[tuple[int, float, float]]:
        """(shard, from, to): each stretch within [since, until] in which a shard had no
        live holder: released, or its holder's last renewal older than the lease duration."""
        stretches = []
        for shard in range(self.shards):
            held = self.tenures.get(shard, [])
            free_from = since if not held or held[0].start > since else None
            for index, tenure in enumerate(held):
                if free_from is not None and tenure.start > free_from:
                    stretches.append((shard, free_from, min(tenure.start, until)))
                following = held[index + 1] if index + 1 < len(held) else None
                if tenure.released:
                    assert tenure.end is not None
                    gone = tenure.end
                else:
                    gone = tenure.last + self.lease_duration
                    if following is not None and following.start <= gone:
                        gone = following.start
                free_from = max(gone, since)
            if free_from is not None and free_from < until:
                stretches.append((shard, free_from, until))
        return [(s, a, b) for s, a, b in stretches if b > a and a < until and b > since]

    def holder_at(self, shard: int, moment: float) -> str | None:
        """The live holder of `shard` at `moment`, per the Lease's writes."""
        for tenure in self.tenures.get(shard, []):
            if tenure.covers(moment) and moment < tenure.last + self.lease_duration:
                return tenure.holder
        return None

    def writes_by(
        self, writer: str, keys: Iterable[str], since: float, until: float = float("inf")
    ) -> list[Request]:
        """`writer`'s successful writes of `keys` answered within [since, until)."""
        wanted = set(keys)
        owners: dict[tuple[str, str, str], str] = {}
        found = []
        for request in self.requests:
            key = self._key(request, owners)
            if (
                key in wanted
                and request.succeeded
                and self.identities.get(request.source, request.source) == writer
                and since <= request.at < until
            ):
                found.append(request)
        return found

    def written(self, since: float, writers: Iterable[str] | None = None) -> set[tuple[str, str]]:
        """(kind, key) of every successful write answered after `since` (by `writers`)."""
        wanted = None if writers is None else set(writers)
        owners: dict[tuple[str, str, str], str] = {}
        found = set()
        for request in self.requests:
            key = self._key(request, owners)
            writer = self.identities.get(request.source, request.source)
            if (
                key is not None
                and request.succeeded
                and request.at > since
                and (wanted is None or writer in wanted)
            ):
                found.add((request.kind, key))
        return found

    def writes_by_key(self, key: str, since: float) -> list[Request]:
        """Every successful write of `key`, by anyone, answered at or after `since`."""
        owners: dict[tuple[str, str, str], str] = {}
        return [
            r
            for r in self.requests
            if self._key(r, owners) == key and r.succeeded and r.at >= since
        ]

    def acquired(self, shard: int, since: float) -> list[Tenure]:
        """The tenures of `shard` that began at or after `since`."""
        return [t for t in self.tenures.get(shard, []) if t.start >= since]


def by_writer(requests: Iterable[Request], identities: Mapping[str, str]) -> dict[str, int]:
    """How many successful writes (Leases aside) each replica made."""
    counts: dict[str, int] = defaultdict(int)
    for request in requests:
        if request.succeeded and request.kind != "Lease":
            counts[identities.get(request.source, request.source)] += 1
    return dict(counts)
