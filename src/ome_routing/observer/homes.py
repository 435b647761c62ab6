"""What the observer holds of each home, and the small rules it applies to one.

`Home` is a home's record: its endpoint and policy, the request built from them (or why
none can be), its window and verdict as last judged, and where it stands in the
schedule (when it is due, the poll underway; the moments that judge it again between
polls wait in `rejudging.Rejudging`). Homes of equal policies share one policy object and one `WindowSettings`
(`shared_policy`, `window_settings`), so that 100,000 homes of a few thousand services
do not hold 100,000 copies.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from functools import lru_cache, partial
from typing import Any, Protocol

from ome_routing.core.capacity import Verdict, Window, WindowSettings
from ome_routing.core.pollrules import CapacityPolicy
from ome_routing.observer import failures
from ome_routing.observer.budget import DEFAULT_FLOW
from ome_routing.observer.failures import PollFailure
from ome_routing.observer.flight import Flight
from ome_routing.observer.polling import build_request
from ome_routing.observer.request import PollRequest

HomeKey = Hashable
Clock = Callable[[], datetime]


#: The wall clock, in UTC. A `partial`, not a function: it is read on every poll, and the
#: call of a function of ours would come on top of `datetime.now`'s.
wall_clock: Clock = partial(datetime.now, UTC)


class Line(Protocol):
    """Who sends a home's poll when a slot of the budget passes to it (the dispatcher)."""

    def _slot_passed(self, home: Home) -> None: ...


class Phase(Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"


@dataclass(eq=False, slots=True)
class Home:
    key: HomeKey
    endpoint: str
    policy: CapacityPolicy
    #: the request to send, or why none can be built
    request: PollRequest | PollFailure
    window: Window
    verdict: Verdict
    #: the window's `next_change` as last judged (None: nothing to age out, or not judged
    #: because the home was due again at once)
    change: datetime | None = None
    #: when the home's next poll is due, in event-loop seconds
    due: float = 0.0
    #: the poll underway, when its request went out, and the deadline after it
    flight: Flight | None = None
    picked: float = 0.0
    following: float = 0.0
    #: no longer the observer's: not polled again, its poll underway cancelled
    retired: bool = False
    #: the budget's flow of its polls: the InferenceService's namespace
    flow: str = DEFAULT_FLOW
    #: who sends its poll when a slot passes to it while it waits in the budget's line
    line: Line | None = None

    # --- a waiter in the budget's line (`budget.Waiter`) -------------------------------

    def done(self) -> bool:
        """A home that is no longer the observer's gives up its place in line."""
        return self.retired

    def set_result(self, result: Any, /) -> None:
        """A slot passed to the home: send its poll."""
        line = self.line
        assert line is not None
        line._slot_passed(self)


#: The reason of the homes held while the observer does not run: one text for all of them.
NOT_SUBMITTED = {
    phase: failures.not_submitted(f"observer is {phase.value}").reason for phase in Phase
}


@lru_cache(maxsize=1024)
def shared_policy(policy: CapacityPolicy) -> CapacityPolicy:
    """The first of the equal policies seen: homes of one service share one object."""
    return policy


@lru_cache(maxsize=1024)
def window_settings(policy: CapacityPolicy) -> WindowSettings:
    """One window settings object for the homes of equal policies."""
    return WindowSettings(samples=policy.samples, quorum=policy.quorum, max_age=policy.max_age)


def due_of(entry: tuple[float, Home]) -> float:
    return entry[0]


def home_request(endpoint: str, policy: CapacityPolicy) -> PollRequest | PollFailure:
    try:
        return build_request(endpoint, policy.path, policy.method)
    except PollFailure as failure:
        return failure
