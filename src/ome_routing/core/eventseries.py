"""How the journal's Events are aggregated and rate-limited, as client-go's event tools do.

Two rules, with client-go's numbers:

- **Series** (`k8s.io/client-go/tools/events`, the `events.k8s.io/v1` broadcaster): a
  repeat of an Event already written is not a new Event. It joins the first one's
  series: `series.count` goes up by one and `series.lastObservedTime` moves to the
  repeat. A series ends when nothing joined it for `SERIES_WINDOW` (the broadcaster's
  `finishTime`, 6 minutes); the next repeat then starts a new Event. Unlike that
  broadcaster, whose key leaves the note out, a repeat here is the same
  (regarding, type, reason, action, note), as `tools/record`'s aggregator keys it, so that
  each text of a flapping home counts its own repeats.
- **Rate** (`k8s.io/client-go/tools/record`'s `EventSourceObjectSpamFilter`): a token
  bucket per TrafficMap, `BURST` (25) writes at once, refilled at one token every
  `REFILL` (5 minutes, `defaultSpamQPS = 1/300`). Every write takes a token: the create
  of a new Event and each update of a series. A new Event that finds no token is
  dropped (the change is still logged); a series update that finds none waits for one
  (the count is kept and written with the next token), so counts end up right.

So the bound, per TrafficMap: at most `BURST + T / REFILL` Event writes (creates and
series updates together) in any `T`; `BURST` at once, then 0.2 a minute
(`writes_bound`).

Pure: `now` is an argument; values only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

#: client-go `tools/events`: a series ends after this long with no repeat (`finishTime`)
SERIES_WINDOW = timedelta(minutes=6)
#: client-go `tools/record`: writes allowed at once per object (`defaultSpamBurst`)
BURST = 25
#: client-go `tools/record`: one more write per this long (`defaultSpamQPS = 1/300`)
REFILL = timedelta(minutes=5)


def writes_bound(span: timedelta, burst: int = BURST, refill: timedelta = REFILL) -> int:
    """The most Event writes one TrafficMap can make in any stretch of `span`."""
    return burst + math.floor(span / refill)


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket: `tokens` as of `at` (refilled lazily, capped at `burst`)."""

    tokens: float
    at: datetime
    burst: int = BURST
    refill: timedelta = REFILL

    @classmethod
    def full(cls, now: datetime, burst: int = BURST, refill: timedelta = REFILL) -> Bucket:
        return cls(float(burst), now, burst, refill)

    def level(self, now: datetime) -> float:
        """The tokens at `now` (time that runs backwards refills nothing)."""
        elapsed = max(now - self.at, timedelta(0))
        return min(float(self.burst), self.tokens + elapsed / self.refill)

    def take(self, now: datetime) -> tuple[Bucket, bool]:
        """Take one token if there is one; the bucket after, and whether it gave one."""
        level = self.level(now)
        if level >= 1.0:
            return replace(self, tokens=level - 1.0, at=max(now, self.at)), True
        return replace(self, tokens=level, at=max(now, self.at)), False

    def next_token(self, now: datetime) -> datetime:
        """When the bucket next holds a whole token (`now` if it holds one)."""
        level = self.level(now)
        if level >= 1.0:
            return now
        return now + (1.0 - level) * self.refill


@dataclass(frozen=True, slots=True)
class Series:
    """One Event as written and its repeats since: `count` observations (1: no series
    yet), the last at `last`; `written` is the count the API server holds."""

    name: str
    first: datetime
    last: datetime
    count: int = 1
    written: int = 1

    def open(self, now: datetime) -> bool:
        """A repeat at `now` joins this Event's series (the window has not passed)."""
        return now - self.last < SERIES_WINDOW

    def repeat(self, now: datetime) -> Series:
        return replace(self, count=self.count + 1, last=max(now, self.last))

    @property
    def behind(self) -> bool:
        """Repeats the API server has not been told of yet."""
        return self.count > self.written

    def wrote(self, count: int) -> Series:
        return replace(self, written=max(self.written, count))
