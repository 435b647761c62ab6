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

With `$STALL_LOG` set (`run.py --stalls FILE`), it appends to that file a line for every
hold-up of the controller's event loop of `STALL_MS` or more (a probe that sleeps 20 ms at
a time, and a thread that records, once a hold-up, where the main thread was), every
garbage collection of `STALL_MS` or more, and every `malloc_trim` of the collector's pacer
that takes as long; each line starts with the wall-clock time. A diagnosis too.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import runpy
import signal
import sys
import threading
import time
import traceback
import tracemalloc
from collections.abc import Callable
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


#: Hold-ups, collections and trims this long or longer are logged (milliseconds).
STALL_MS = 100.0
_PROBE_SECONDS = 0.02


class _Stalls:
    """Writes what held the controller's event loop to `path`."""

    def __init__(self, path: str) -> None:
        self._out = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life
        self._lock = threading.Lock()
        self._main = threading.main_thread().ident or 0
        #: when the probe last ran (monotonic); 0 until the loop runs
        self.ticked = 0.0
        self._gc_started = 0.0

    def line(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}"
        with self._lock:
            self._out.write(f"{stamp} {text}\n")

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took = (time.perf_counter() - self._gc_started) * 1000
        if took >= STALL_MS:
            self.line(
                f"gc generation {info.get('generation')}: {took:.0f} ms, "
                f"{info.get('collected')} collected"
            )

    async def probe(self) -> None:
        """Sleep `_PROBE_SECONDS` at a time; log each time the loop woke it late."""
        while True:
            before = time.monotonic()
            self.ticked = before
            await asyncio.sleep(_PROBE_SECONDS)
            late = (time.monotonic() - before - _PROBE_SECONDS) * 1000
            if late >= STALL_MS:
                self.line(f"event loop held {late:.0f} ms")

    def watch(self) -> None:
        """A thread: once a hold-up, where the main thread is (while it holds the loop)."""
        seen = 0.0
        while True:
            time.sleep(STALL_MS / 2000)
            ticked = self.ticked
            if ticked and ticked != seen and time.monotonic() - ticked > STALL_MS / 1000:
                seen = ticked
                frame = sys._current_frames().get(self._main)
                if frame is not None:
                    where = " <- ".join(
                        f"{f.name} ({os.path.basename(f.filename)}:{f.lineno})"
                        for f in reversed(traceback.extract_stack(frame)[-8:])
                    )
                    self.line(f"event loop held at: {where}")


def _stall_log(path: str) -> None:
    """Install `_Stalls`: the probe runs beside the collector's pacer, on the same loop."""
    import ome_routing.observer as observer
    from ome_routing.observer import tuning

    stalls = _Stalls(path)
    gc.callbacks.append(stalls.on_gc)
    threading.Thread(target=stalls.watch, name="stall watch", daemon=True).start()
    pace = observer.pace_collections
    trimmer = tuning.heap_trimmer

    def timed_trimmer() -> Callable[[], None] | None:
        trim = trimmer()
        if trim is None:
            return None

        def timed() -> None:
            started = time.perf_counter()
            trim()
            took = (time.perf_counter() - started) * 1000
            if took >= STALL_MS:
                stalls.line(f"malloc_trim: {took:.0f} ms")

        return timed

    async def pace_and_probe() -> None:
        probe = asyncio.ensure_future(stalls.probe())
        try:
            await pace()  # the controller calls it without arguments
        finally:
            probe.cancel()

    tuning.heap_trimmer = timed_trimmer
    observer.pace_collections = pace_and_probe  # type: ignore[assignment]
    stalls.line("controller started with the stall log")


if os.environ.get("STALL_LOG"):
    _stall_log(os.environ["STALL_LOG"])
signal.signal(signal.SIGUSR1, _snapshot)
sys.argv = ["ome_routing.cli.main", *sys.argv[1:]]
runpy.run_module("ome_routing.cli.main", run_name="__main__")
