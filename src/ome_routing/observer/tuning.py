"""Garbage-collector settings for a process that keeps many homes.

The observer keeps a task, a window and a few readings for every home: with ten
thousand homes, a full collection walks several hundred thousand objects and stalls
the event loop long enough to push polls past their period. Almost all of what a poll
allocates is freed by reference counting the moment it is done with, so the collector
can run far less often without the process growing. A process-level choice: the
controller makes it once, at startup.
"""

from __future__ import annotations

import gc

#: Allocations (net of frees) between young collections; CPython's default is 700.
YOUNG_THRESHOLD = 50_000
#: Young collections per middle one, and middle ones per full one (CPython: 10 and 10).
MIDDLE_THRESHOLD = 20
OLD_THRESHOLD = 10


def tune_gc() -> None:
    """Freeze what startup has made and collect less often. Call once, before any home.

    Objects alive now (modules, classes, configuration) are moved out of the
    collector's reach, so no later collection walks them again.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
