"""Garbage-collector settings for a process that keeps many homes.

The observer keeps a task, a window and a few readings for every home, and every poll
replaces its home's window with a new one that lives for a period. With 100,000 homes
the collector's own triggers go wrong in both directions:

- Its young-generation count is allocations net of frees, and each new window frees
  the old one: in steady state the count hardly moves, so a young collection comes
  only every few seconds and walks hundreds of thousands of windows at once (0.1-0.3 s
  with the event loop stalled).
- A full collection walks the whole heap, about a million objects (0.7-1.2 s).

Almost all of what a poll allocates is freed by reference counting, and the windows
hold no cycles. So the event loop paces the collector itself (`pace_collections`): every
`BEAT_SECONDS` it collects the young and middle generations, which then hold only what
the last beat made (about a thousand polls' worth: a few milliseconds); every
`FULL_EVERY` beats (about ten minutes) it runs a full collection, the one stall that
remains, to free cycles that reached the oldest generation. Every `TRIM_EVERY` beats it
also hands the C heap's free pages back to the system (glibc's `malloc_trim`, where
there is one): decoding the API server's lists and watch events leaves megabytes free
but resident, which glibc returns on its own only from the top of its heap. The collector's own full collections are off, and its own young
ones stay on, with a high threshold, for bursts of allocation between two beats.
A process-level choice: the controller makes it once, at startup.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
from collections.abc import Callable

#: Allocations (net of frees) between the collector's own young collections; CPython's
#: default is 700. The beats of `pace_collections` come first in steady state.
YOUNG_THRESHOLD = 50_000
#: Young collections per middle one (CPython: 10).
MIDDLE_THRESHOLD = 20
#: Middle collections per full one: so many that the collector never starts one itself.
OLD_THRESHOLD = 1_000_000_000

#: Seconds between two beats of `pace_collections`: each collects the young and middle
#: generations.
BEAT_SECONDS = 0.1
#: Beats per full collection: about ten minutes.
FULL_EVERY = 6_000
#: Beats per return of the C heap's free pages to the system: about ten seconds.
TRIM_EVERY = 100


def tune_gc() -> None:
    """Freeze what startup has made and collect less often. Call once, before any home.

    Objects alive now (modules, classes, configuration) are moved out of the
    collector's reach, so no later collection walks them again. Full collections are
    left to `pace_collections`.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)


def generation_at(beat: int, full_every: int = FULL_EVERY) -> int:
    """The oldest generation that beat number `beat` (from 1) collects: 1, or 2 (full)."""
    return 2 if beat % full_every == 0 else 1


def heap_trimmer() -> Callable[[], None] | None:
    """glibc's `malloc_trim(0)`, or None where the C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def trim_all() -> None:
        trim(0)

    return trim_all


async def pace_collections(every: float = BEAT_SECONDS) -> None:
    """Collect from the event loop, a little and often, until cancelled."""
    trim = heap_trimmer()
    beat = 0
    while True:
        await asyncio.sleep(every)
        beat += 1
        gc.collect(generation_at(beat))
        if trim is not None and beat % TRIM_EVERY == 0:
            trim()
