"""What `/healthz` and `/readyz` say: whether the replica sees the API server, and whether
it does its part.

- **`/healthz` (liveness)** fails when a watch has been dead past its bound and the
  informer cannot list again (`Informer.dead`): the replica no longer sees placements,
  drains or spec changes and cannot recover on its own, so kubelet restarts it. A watch
  that is merely quiet, or dead while a list succeeds, is no failure: the informer lists
  again by itself.
- **`/readyz` (readiness)** passes once the replica does its part: it leads (or runs without
  leader election) and every cache it reads has listed; or it is a healthy standby, that
  is, campaigning for the Lease and its reads of the Lease answered within the renew
  deadline (`LeaderElector.answering`). A replica that leads but has not listed yet is not
  ready: it would route from an empty cache.
  A sharded replica (`--sharding`) is ready when its member Lease was renewed within the
  renew deadline (`ShardSet.answering`) and every cache it reads has listed; one that
  holds no shard is a healthy spare, as a standby is.

The answers are controller-runtime's healthz handler's, so that the probes read as a Go
manager's do: `ok` (200) when every check passes, otherwise 500 with one line per check
(`[+]name ok`, `[-]name failed: reason withheld`) and `healthz check failed` (or
`readyz ...`). The reason is logged, once per change, not served. The check names
(`watches`, `informer-sync`, `leader-election`, `shard-membership`) are ours: OME's manager registers only
controller-runtime's `ping`.

This module only judges; the HTTP server is the command's (`cli.controller`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ome_routing.kube.watching import Informer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    """One named check's outcome: `problem` is None when it passes."""

    name: str
    problem: str | None = None


def answer(endpoint: str, checks: list[Check]) -> tuple[int, str]:
    """controller-runtime's healthz answer for `checks`: the status code and the body."""
    if all(check.problem is None for check in checks):
        return 200, "ok"
    lines = [
        f"[+]{c.name} ok" if c.problem is None else f"[-]{c.name} failed: reason withheld"
        for c in checks
    ]
    return 500, "\n".join([*lines, f"{endpoint} check failed", ""])


@dataclass
class Health:
    """The replica's health, as its parts report it; see the module docstring.

    `informers` are every cache of the replica (dead watches fail `/healthz`); `needed`
    are the ones it must have listed to be ready while it leads. `leading` and
    `standby_answering` come from the elector; without leader election (`elector` unset)
    the replica is always the one doing the work. `member_answering` (sharded) comes from
    the `ShardSet`: set, it replaces the election's check.
    """

    #: whether this replica has work that needs the caches (a control plane replica)
    has_work: bool = True
    leading: Callable[[], bool] | None = None
    standby_answering: Callable[[], bool] | None = None
    member_answering: Callable[[], bool] | None = None
    informers: list[Informer] = field(default_factory=list)
    needed: list[Informer] = field(default_factory=list)
    _logged: dict[str, str | None] = field(default_factory=dict)

    def watch(self, *informers: Informer, needed: bool = False) -> None:
        """Count `informers` for liveness, and for readiness too when `needed`."""
        self.informers.extend(informers)
        if needed:
            self.needed.extend(informers)

    def liveness(self, now: float) -> list[Check]:
        """`now`: the event loop's clock, the one informers stamp what they hear with."""
        dead = [i for i in self.informers if i.dead(now)]
        problem = None
        if dead:
            problem = "; ".join(
                f"watch of {i.kind} heard nothing for {now - (i.heard_at or now):.0f}s "
                f"(bound {i.idle_timeout:g}s) and listing again fails"
                for i in dead
            )
        return [self._logged_check("watches", problem)]

    def readiness(self) -> list[Check]:
        if not self.has_work:
            return [Check("informer-sync")]
        if self.member_answering is not None:
            return self._sharded_readiness(self.member_answering())
        leading = self.leading is None or self.leading()
        if not leading:
            answering = self.standby_answering is not None and self.standby_answering()
            standby = (
                None if answering else "standby: the Lease went unread past the renew deadline"
            )
            return [self._logged_check("leader-election", standby)]
        unsynced = [i.kind for i in self.needed if not i.synced.is_set()]
        unlisted = None
        if not self.needed:
            unlisted = "leading; the caches are not set up yet"
        elif unsynced:
            unlisted = f"caches not listed yet: {', '.join(unsynced)}"
        return [Check("leader-election"), self._logged_check("informer-sync", unlisted)]

    def _sharded_readiness(self, answering: bool) -> list[Check]:
        member = None if answering else "the member Lease went unrenewed past the renew deadline"
        unsynced = [i.kind for i in self.needed if not i.synced.is_set()]
        unlisted = None
        if not self.needed:
            unlisted = "the caches are not set up yet"
        elif unsynced:
            unlisted = f"caches not listed yet: {', '.join(unsynced)}"
        return [
            self._logged_check("shard-membership", member),
            self._logged_check("informer-sync", unlisted),
        ]

    def _logged_check(self, name: str, problem: str | None) -> Check:
        if self._logged.get(name, None) != problem and (problem or name in self._logged):
            if problem:
                log.info("%s check failed", name, extra={"reason": problem})
            else:
                log.info("%s check passed", name)
        self._logged[name] = problem
        return Check(name, problem)


def loop_time() -> float:
    return asyncio.get_running_loop().time()
