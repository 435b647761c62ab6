"""The controller under `tracemalloc`, for `run.py --heap-top`: a diagnosis, not a figure.

Runs `ome_routing.cli.main` with tracemalloc on (`HEAP_FRAMES` frames; 0: off); each SIGUSR1 writes a snapshot to
`$HEAP_SNAPSHOT.<n>` (n = 0, 1, ...), then runs a full garbage collection and writes
another to `$HEAP_SNAPSHOT.<n>.collected`: the difference is garbage that waits for the
next full collection. With tracing off, a SIGUSR1 only runs a full collection and hands
the C heap's free pages back (`malloc_trim`, as the controller does every 10 s), and
writes to `$HEAP_SNAPSHOT.<n>.collected` the interpreter's allocator statistics
(`sys._debugmallocstats`) before and after: the resident memory that the controller's
own full collection (once its heap has grown by a quarter) would leave, and how much of pymalloc's arenas
is in use. Tracing slows the controller and adds its own
memory, so the resident-memory figures of a traced run are not comparable to others.
"""

from __future__ import annotations

import ctypes
import gc
import os
import runpy
import signal
import sys
import tracemalloc
from types import FrameType

_FRAMES = int(os.environ.get("HEAP_FRAMES", "1"))
if _FRAMES:
    tracemalloc.start(_FRAMES)
_taken = 0


def _snapshot(_signum: int, _frame: FrameType | None) -> None:
    global _taken
    path = f"{os.environ['HEAP_SNAPSHOT']}.{_taken}"
    _taken += 1
    if not _FRAMES:
        with open(path + ".collected.part", "wb") as out:
            _mallocstats(out.fileno())
            gc.collect()
            ctypes.CDLL(None).malloc_trim(0)
            _mallocstats(out.fileno())
        os.replace(path + ".collected.part", path + ".collected")
        return
    for suffix in ("", ".collected"):
        if suffix:
            gc.collect()
        tracemalloc.take_snapshot().dump(path + suffix + ".part")
        os.replace(path + suffix + ".part", path + suffix)


def _mallocstats(fd: int) -> None:
    """`sys._debugmallocstats()` (which writes to the C stderr) into `fd`."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(fd, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


signal.signal(signal.SIGUSR1, _snapshot)
sys.argv = ["ome_routing.cli.main", *sys.argv[1:]]
runpy.run_module("ome_routing.cli.main", run_name="__main__")
