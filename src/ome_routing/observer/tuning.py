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
the last beat made (about a thousand polls' worth: a few milliseconds); and once the
interpreter's heap has grown by `FULL_GROWTH` since the last full collection, it runs a
full one, the one stall that remains (about a second at 100,000 homes), to free cycles
that reached the oldest generation. That is CPython's own bound on what waits for a
full collection, and the only trigger: a heap that does not grow holds no more garbage
than it did, and a full collection of it on a timer would stall the loop for nothing (at
100,000 homes, a second's worth of polls, 10,000, each time). Cycles do
reach it: a connection that lived through a few beats (a poll that stalled) and its HTTP
parser used to refer to each other, and so did a failed reconcile's task and its error's
traceback. Measured with `tests/chaos/traced_controller.py` under the 1,000 hostile homes
of the chaos suite: 400-1,200 such objects a second, which a full collection only every
ten minutes let pile up (the resident memory grew by 7 MiB a minute). Every `TRIM_EVERY`
beats it also hands the C heap's free pages back to the system (glibc's `malloc_trim`,
where there is one): decoding the API server's lists and watch events leaves megabytes
free but resident, which glibc returns on its own only from the top of its heap. The
collector's own full collections are off, and its own young ones stay on, with a high
threshold, for bursts of allocation between two beats.
A process-level choice: the controller makes it once, at startup.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import sys
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
#: A full collection comes as soon as the interpreter's allocated blocks have grown by this
#: fraction since the last one: the garbage that waits for it stays under a quarter of the
#: heap, the bound CPython's own collector keeps (a full collection once the objects new to
#: the oldest generation reach a quarter of it). A heap that does not grow costs nothing more.
FULL_GROWTH = 0.25
#: Beats per look at the heap's size for `FULL_GROWTH`: about a second. A look walks the
#: interpreter's memory pools: 0.8 ms with 9 million blocks (a 300 MB heap).
GROWTH_EVERY = 10
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


def heap_grew(blocks: int, after_last_full: int, growth: float = FULL_GROWTH) -> bool:
    """Whether a heap of `blocks` has grown by more than `growth` since the last full collection."""
    return blocks > after_last_full * (1 + growth)


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


async def pace_collections(
    every: float = BEAT_SECONDS,
    *,
    growth: float = FULL_GROWTH,
    blocks: Callable[[], int] = sys.getallocatedblocks,
) -> None:
    """Collect from the event loop, a little and often, until cancelled.

    `blocks` measures the heap (the interpreter's allocated blocks), every
    `GROWTH_EVERY` beats.
    """
    trim = heap_trimmer()
    beat = 0
    after_last_full = blocks()
    while True:
        await asyncio.sleep(every)
        beat += 1
        generation = 1
        if beat % GROWTH_EVERY == 0 and heap_grew(blocks(), after_last_full, growth):
            generation = 2
        gc.collect(generation)
        if generation == 2:
            after_last_full = blocks()
        if trim is not None and beat % TRIM_EVERY == 0:
            trim()
