"""The capacity ceiling of one home: its sample window, and the ceiling it gives.

How the ceiling caps the home's admitted replicas is `core.allocation`'s.

Why one module of ~480 lines: it is one concept, the window's state machine (record a
reading or a failure, judge the state, say when it next changes), on the compiled poll
path (`devcluster.compiled`). Its recording fast path (`_steady`, `_fresh_window`,
`_reranked`) and its judging (`_assess`, `_verdict`, `_next_change`) keep the window's
invariants (`ordered`, `ranked`) together; apart, each half would rely on the other's
private rules.

The window (DESIGN section 4) keeps the last `samples` readings of successful polls,
a repeated `observedAt` included. A failed poll clears it, and so does a report that is
from the future or already stale when it arrives. The home has a ceiling while it holds
at least `quorum` readings younger than `maxAge`: the `quorum`-th lowest of them, so
that up to `quorum - 1` low readings cannot set it. Readings that reach `maxAge` drop
out between polls, as OME's `expire` drops them. Every function is pure and takes
`now`; none reads a clock.

States and their fallback reasons (`WindowState`, `_REASONS`), as OME's window gives them:

- no report yet: nothing since start or reset.
- awaiting quorum: fewer than `quorum` readings after a successful poll, none lost to
  age since; counts them, `(1/3 accepted samples)`. A successful poll always says
  this below quorum, even when readings expired before it.
- usable: a ceiling, no fallback reason.
- stale: the last poll returned a stale report, or every reading of the window has
  reached `maxAge` since the last poll (never `(0/3 accepted samples)`).
- expired: some readings reached `maxAge` since the last poll, and fewer than `quorum`
  fresh ones remain; counts them. It lasts only until the next poll.
- failed: the last poll failed; its reason verbatim (a future timestamp included).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from itertools import pairwise
from operator import attrgetter

from ome_routing.core.durations import Duration
from ome_routing.core.report import FUTURE, Reading, stale_reason

NO_REPORT_YET = "no capacity report yet"


@lru_cache(maxsize=256)
def awaiting_quorum_reason(accepted: int, quorum: int) -> str:
    return f"capacity report awaiting quorum ({accepted}/{quorum} accepted samples)"


def expired_reason(accepted: int, quorum: int) -> str:
    return (
        "capacity report awaiting quorum after stale samples expired "
        f"({accepted}/{quorum} accepted samples)"
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a home's window says at one moment: a ceiling, or why it has none."""

    ceiling: int | None
    fallback_reason: str | None

    def __post_init__(self) -> None:
        if (self.ceiling is None) == (self.fallback_reason is None):
            raise ValueError("a verdict has either a ceiling or a fallback reason")


@dataclass(frozen=True, slots=True)
class WindowSettings:
    """The poll's `samples`, `quorum` and `maxAge`, as the window uses them.

    The policy layer validates them against the spec's rules and messages; this only
    refuses settings that the window cannot work with.
    """

    samples: int
    quorum: int
    max_age: Duration
    #: `max_age` as the shortest whole-microsecond span at least as long (derived)
    max_age_span: timedelta = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples ({self.samples}) must be at least 1")
        if not 1 <= self.quorum <= self.samples:
            raise ValueError(
                f"quorum ({self.quorum}) must be at least 1 and at most samples ({self.samples})"
            )
        if self.max_age.nanoseconds <= 0:
            raise ValueError(f"maxAge ({self.max_age}) must be positive")
        # asked for on every poll and every judgement: worked out once
        object.__setattr__(self, "max_age_span", self.max_age.ceil_timedelta())


class WindowState(StrEnum):
    """The named states of a window; each has one fallback reason (`_REASONS`)."""

    NO_REPORT = "NoReport"
    AWAITING_QUORUM = "AwaitingQuorum"
    USABLE = "Usable"
    STALE = "Stale"
    EXPIRED = "Expired"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class Window:
    """One home's readings, oldest first, and what its last poll left behind.

    `failure` is the reason of the last poll when it failed (the window is then
    empty); `stale` says that reason is a stale report. The readings were all fresh at
    the last poll: those that are no longer fresh at `now` expired since.

    `ordered` and `ranked` are derived from `readings`, and kept by `record_reading` so
    that a poll need not look at every reading again (with thousands of homes, that
    memory is cold by the time a home is polled): `ordered` says the readings are in
    `observedAt` order (False: not known to be), `ranked` holds their servable counts,
    lowest first (None: not worked out). Neither takes part in comparisons.
    """

    settings: WindowSettings
    readings: tuple[Reading, ...] = ()
    failure: str | None = None
    stale: bool = False
    ordered: bool = field(default=False, compare=False, repr=False)
    ranked: tuple[int, ...] | None = field(default=None, compare=False, repr=False)


_new_window = object.__new__
# the slots' own setters: a frozen dataclass's `__init__` sets each field through
# `object.__setattr__`, which costs about half as much again on every poll
_SET_WINDOW = tuple(
    getattr(Window, name).__set__
    for name in ("settings", "readings", "failure", "stale", "ordered", "ranked")
)
try:
    _new_window(Window)
    _BY_SLOTS = True
except TypeError:
    # compiled (`devcluster.compiled`): a native class is made only by its constructor,
    # which is the fast way there
    _BY_SLOTS = False


def _fresh_window(
    settings: WindowSettings, readings: tuple[Reading, ...], ranked: tuple[int, ...]
) -> Window:
    """`Window(settings, readings, None, False, True, ranked)`, made for the usual poll.

    The readings are in order, fresh, with `ranked` their counts lowest first.
    """
    if not _BY_SLOTS:
        return Window(settings, readings, None, False, True, ranked)
    window = _new_window(Window)
    set_settings, set_readings, set_failure, set_stale, set_ordered, set_ranked = _SET_WINDOW
    set_settings(window, settings)
    set_readings(window, readings)
    set_failure(window, None)
    set_stale(window, False)
    set_ordered(window, True)
    set_ranked(window, ranked)
    return window


def empty_window(settings: WindowSettings) -> Window:
    """A window with nothing in it: at start, on leadership, on a policy or endpoint change."""
    return Window(settings)


_NO_TIME = timedelta(0)


_OBSERVED_AT: Callable[[Reading], datetime] = attrgetter("observed_at")
_SERVABLE: Callable[[Reading], int] = attrgetter("servable")


def _fresh(window: Window, now: datetime) -> Sequence[Reading]:
    """The readings that have not reached `maxAge` at `now`, oldest first.

    The readings themselves when none has aged out; a suffix of them when they are in
    `observedAt` order.
    """
    readings = window.readings
    if not readings:
        return readings
    try:
        cutoff = now - window.settings.max_age_span
    except OverflowError:  # before year 1: nothing can be that old
        return readings
    if window.ordered:
        for index, reading in enumerate(readings):
            if reading.observed_at > cutoff:
                return readings[index:] if index else readings
        return ()
    # usually none has aged out: one look at the oldest stamp says so
    if min(map(_OBSERVED_AT, readings)) > cutoff:
        return readings
    return [reading for reading in readings if reading.observed_at > cutoff]


def record_reading(window: Window, reading: Reading, now: datetime) -> Window:
    """Add the reading of a successful poll; a future or stale one fails the poll.

    The checks are `report.freshness_failure`'s, with the window's span worked out once.
    """
    settings = window.settings
    observed_at = reading.observed_at
    readings = window.readings
    if not readings:
        # the first reading, or the first after a failure: nothing to keep or rank
        first = _first(settings, reading, now)
        if first is not None:
            return first
    elif window.ordered and readings[-1].observed_at <= observed_at <= now:
        steady = _steady(window, reading, now)
        if steady is not None:
            return steady
    age = now - observed_at
    if age < _NO_TIME:
        return Window(settings, failure=FUTURE)
    if age >= settings.max_age_span:
        return Window(settings, failure=stale_reason(settings.max_age), stale=True)
    fresh = _fresh(window, now)
    kept = (*fresh, reading)
    excess = len(kept) - settings.samples
    if excess > 0:
        kept = kept[excess:]
    if window.ordered or not readings:
        # `fresh` is a suffix of the readings: what left the window is a prefix of them,
        # then the first `excess` fresh ones
        ordered = not fresh or fresh[-1].observed_at <= reading.observed_at
        ranked = window.ranked if readings else ()
        if ranked is not None:
            gone = readings[: len(readings) - len(fresh)] + tuple(fresh[: max(excess, 0)])
            ranked = _reranked(ranked, gone, reading.servable)
    else:
        ordered = all(a.observed_at <= b.observed_at for a, b in pairwise(kept))
        ranked = None
    if ranked is None:
        ranked = tuple(sorted(map(_SERVABLE, kept)))
    return Window(settings, kept, ordered=ordered, ranked=ranked)


def _first(settings: WindowSettings, reading: Reading, now: datetime) -> Window | None:
    """`record_reading` into a window with no readings, or None for the general path."""
    try:
        cutoff = now - settings.max_age_span
    except OverflowError:  # before year 1
        return None
    if cutoff < reading.observed_at <= now:
        return _fresh_window(settings, (reading,), (reading.servable,))
    return None


def _steady(window: Window, reading: Reading, now: datetime) -> Window | None:
    """`record_reading` for the usual poll of a steady reporter, or None for the general path.

    The window is in order and the reading no older than its last: at most the oldest
    reading leaves it (aged out, or pushed out of a full window). When more have aged
    out, the general path works it out.
    """
    settings = window.settings
    readings = window.readings
    try:
        cutoff = now - settings.max_age_span
    except OverflowError:  # before year 1
        return None
    oldest = readings[0]
    if oldest.observed_at > cutoff:  # none has aged out
        drop = len(readings) >= settings.samples
    elif len(readings) == 1 or readings[1].observed_at > cutoff:  # only the oldest has
        drop = True
    else:
        return None
    if reading.observed_at <= cutoff:
        return Window(settings, failure=stale_reason(settings.max_age), stale=True)
    kept = (*readings[1:], reading) if drop else (*readings, reading)
    ranked = window.ranked
    if ranked is None:
        ranked = tuple(sorted(map(_SERVABLE, kept)))
    elif not drop:
        servable = reading.servable
        # while the window fills, a steady count goes last: no list, no search
        ranked = (*ranked, servable) if servable >= ranked[-1] else _reranked(ranked, (), servable)
    elif oldest.servable != reading.servable:
        ranked = _reranked(ranked, (oldest,), reading.servable)
    return _fresh_window(settings, kept, ranked)


def _reranked(ranked: tuple[int, ...], gone: Sequence[Reading], added: int) -> tuple[int, ...]:
    """`ranked` without the counts of `gone` and with `added`, still lowest first."""
    counts = list(ranked)
    for reading in gone:
        del counts[bisect_left(counts, reading.servable)]
    insort(counts, added)
    return tuple(counts)


def record_failure(window: Window, reason: str) -> Window:
    """A failed poll: the window forgets every reading and shows the reason."""
    return Window(window.settings, (), reason)


def state(window: Window, now: datetime) -> WindowState:
    """The window's named state at `now`."""
    return _assess(window, now)[0]


def _assess(window: Window, now: datetime) -> tuple[WindowState, Sequence[Reading]]:
    if window.failure is not None:
        return (WindowState.STALE if window.stale else WindowState.FAILED), ()
    if not window.readings:
        return WindowState.NO_REPORT, ()
    fresh = _fresh(window, now)
    if len(fresh) >= window.settings.quorum:
        return WindowState.USABLE, fresh
    if not fresh:
        return WindowState.STALE, fresh
    if len(fresh) < len(window.readings):
        return WindowState.EXPIRED, fresh
    return WindowState.AWAITING_QUORUM, fresh


_REASONS: dict[WindowState, Callable[[Window, int], str | None]] = {
    WindowState.NO_REPORT: lambda window, accepted: NO_REPORT_YET,
    WindowState.AWAITING_QUORUM: lambda window, accepted: awaiting_quorum_reason(
        accepted, window.settings.quorum
    ),
    WindowState.USABLE: lambda window, accepted: None,
    WindowState.STALE: lambda window, accepted: stale_reason(window.settings.max_age),
    WindowState.EXPIRED: lambda window, accepted: expired_reason(accepted, window.settings.quorum),
    WindowState.FAILED: lambda window, accepted: window.failure,
}


def fallback_reason(window_state: WindowState, window: Window, accepted: int) -> str | None:
    """The one fallback reason of a state; `accepted` counts the fresh readings."""
    return _REASONS[window_state](window, accepted)


def _ceiling(window: Window, fresh: Sequence[Reading]) -> int:
    """The `quorum`-th lowest servable count of the fresh readings."""
    quorum = window.settings.quorum
    if window.ranked is not None and len(fresh) == len(window.readings):
        return window.ranked[quorum - 1]
    return sorted(map(_SERVABLE, fresh))[quorum - 1]


def verdict(window: Window, now: datetime) -> Verdict:
    """The home's ceiling at `now`, or the reason it has none."""
    return _verdict(window, *_assess(window, now))


#: The verdicts of the usual ceilings, made once: a verdict is immutable, and one is
#: judged on every poll.
_USABLE = tuple(Verdict(ceiling, None) for ceiling in range(256))


#: The verdicts of recent fallback reasons, by their text (started over when full).
_FALLBACKS: dict[str, Verdict] = {}


def _verdict(window: Window, window_state: WindowState, fresh: Sequence[Reading]) -> Verdict:
    if window_state is WindowState.USABLE:
        ceiling = _ceiling(window, fresh)
        return _USABLE[ceiling] if ceiling < 256 else Verdict(ceiling, None)
    reason = fallback_reason(window_state, window, len(fresh))
    assert reason is not None
    return _fallback(reason)


def _fallback(reason: str) -> Verdict:
    held = _FALLBACKS.get(reason)
    if held is None:
        if len(_FALLBACKS) >= 1024:
            _FALLBACKS.clear()
        held = _FALLBACKS[reason] = Verdict(None, reason)
    return held


def next_change(window: Window, now: datetime) -> datetime | None:
    """The moment after `now` at which the verdict changes without a poll.

    Only age changes a window between polls: the verdict holds before the returned
    moment, and differs from it on. None when no fresh reading is left to age out.
    While the home has a ceiling, readings may age out without effect: those above it,
    and those at or below it as long as `quorum` of these remain.
    """
    window_state, fresh = _assess(window, now)
    ceiling = _ceiling(window, fresh) if window_state is WindowState.USABLE else 0
    return _next_change(window, window_state, fresh, ceiling)


def judge(window: Window, now: datetime) -> tuple[Verdict, datetime | None]:
    """`verdict` and `next_change` at `now` together, looking at the readings once."""
    window_state, fresh = _assess(window, now)
    judged = _verdict(window, window_state, fresh)
    ceiling = judged.ceiling if judged.ceiling is not None else 0
    return judged, _next_change(window, window_state, fresh, ceiling)


def record_and_judge(
    window: Window, reading: Reading, now: datetime
) -> tuple[Window, Verdict, datetime | None]:
    """`record_reading`, then `judge` at the same `now`, in one step for the usual poll.

    A reading that joins a window in order (`_first`, `_steady`) leaves only fresh
    readings in it, with their counts ranked: the verdict and its next change follow
    from the window alone, without looking for aged readings again.
    """
    readings = window.readings
    if not readings:
        recorded = _first(window.settings, reading, now)
    elif window.ordered and readings[-1].observed_at <= reading.observed_at <= now:
        recorded = _steady(window, reading, now)
    else:
        recorded = None
    if recorded is None or recorded.failure is not None:
        if recorded is None:
            recorded = record_reading(window, reading, now)
        return (recorded, *judge(recorded, now))
    kept, ranked = recorded.readings, recorded.ranked
    assert ranked is not None
    settings = recorded.settings
    quorum = settings.quorum
    count = len(kept)
    try:
        if count < quorum:
            judged = _fallback(awaiting_quorum_reason(count, quorum))
            return recorded, judged, kept[0].observed_at + settings.max_age_span
        ceiling = ranked[quorum - 1]
        judged = _USABLE[ceiling] if ceiling < 256 else Verdict(ceiling, None)
        # as `_next_change`: the quorum-th newest reading at or below the ceiling ages out
        seen = 0
        for index in range(count - 1, -1, -1):
            kept_reading = kept[index]
            if kept_reading.servable <= ceiling:
                seen += 1
                if seen == quorum:
                    return recorded, judged, kept_reading.observed_at + settings.max_age_span
    except OverflowError:  # past year 9999: never, in practice
        return recorded, judged, None
    return (recorded, *judge(recorded, now))


def _next_change(
    window: Window, window_state: WindowState, fresh: Sequence[Reading], ceiling: int
) -> datetime | None:
    """`ceiling` is the verdict's while the window is usable (unused otherwise)."""
    if not fresh:
        return None
    step = window.settings.max_age_span
    try:
        ordered = window.ordered
        if window_state is not WindowState.USABLE:
            oldest = fresh[0].observed_at if ordered else min(map(_OBSERVED_AT, fresh))
            return oldest + step
        quorum = window.settings.quorum
        # The ceiling is the quorum-th lowest count: it holds while `quorum` fresh readings
        # at or below it are left (one above it going changes nothing), and readings age
        # out oldest first, so it changes when the quorum-th newest of those ages out.
        # Not sooner: a steady reporter's home is not judged again between its polls.
        if ordered:
            seen = 0
            for reading in reversed(fresh):  # a loop, not a generator: it runs on every poll
                if reading.servable <= ceiling:
                    seen += 1
                    if seen == quorum:
                        return reading.observed_at + step
        stamps = sorted(r.observed_at for r in fresh if r.servable <= ceiling)
        return stamps[len(stamps) - quorum] + step
    except OverflowError:  # past year 9999: never, in practice
        return None
