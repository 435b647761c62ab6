"""Runs `ome-routing controller` with its memory recorded, to see where it goes.

A diagnosis aid for the chaos suite, never part of the product: `Fleet` starts the
controller through it when `CHAOS_TRACE_DIR` is set. It runs the controller's module as
`python -m` would, and from a thread of its own, every `CHAOS_TRACE_EVERY` seconds (20 by
default), appends a line to `CHAOS_TRACE_DIR/memory.tsv`: seconds since start, resident
memory, the Python heap that `tracemalloc` traces (and its peak), glibc's view of the C
heap (`mallinfo2`: bytes in use, bytes free inside it, arena bytes, mmapped bytes), the
thread count, and the interpreter's allocated blocks. It also writes the objects the
collector tracks, counted by type, to `census-<seconds>.tsv`, and a `tracemalloc`
snapshot to `snapshot-<seconds>.pickle`.

- `CHAOS_TRACE_FRAMES` (25 by default): frames per traceback; 0 traces nothing, and
  takes no snapshot (tracing holds memory of its own and slows the controller: with 25
  frames it no longer kept its periods under the 1,000 hostile homes).
- `CHAOS_TRACE_COLLECT=1`: a full collection after each record, its count of
  unreachable objects to `collected.tsv`; `=types` also counts them by type, to
  `garbage-<seconds>.tsv`. An experiment: it changes what it measures.

Compare two snapshots with `python tests/chaos/traced_controller.py --compare A B [N]`.
"""

from __future__ import annotations

import ctypes
import gc
import os
import runpy
import sys
import threading
import time
import tracemalloc
from pathlib import Path


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _mallinfo() -> _MallInfo2 | None:
    try:
        call = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    call.restype = _MallInfo2
    info: _MallInfo2 = call()
    return info


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _record(directory: Path, every: float) -> None:
    began = time.monotonic()
    table = directory / "memory.tsv"
    table.write_text(
        "seconds\trss_kib\ttraced_kib\ttraced_peak_kib\tc_in_use_kib\tc_free_kib"
        "\tc_arena_kib\tc_mmap_kib\tthreads\tpy_blocks\n"
    )
    while True:
        time.sleep(every)
        seconds = round(time.monotonic() - began)
        if tracemalloc.is_tracing():
            snapshot = tracemalloc.take_snapshot()
            snapshot.dump(str(directory / f"snapshot-{seconds:04d}.pickle"))
            del snapshot
        traced, peak = tracemalloc.get_traced_memory()
        info = _mallinfo()
        heap = (
            (info.uordblks // 1024, info.fordblks // 1024, info.arena // 1024, info.hblkhd // 1024)
            if info is not None
            else (0, 0, 0, 0)
        )
        threads = len(os.listdir("/proc/self/task"))
        census: dict[str, int] = {}
        for obj in gc.get_objects():
            name = type(obj).__qualname__
            census[name] = census.get(name, 0) + 1
        with (directory / f"census-{seconds:04d}.tsv").open("w") as out:
            for name, count in sorted(census.items(), key=lambda item: -item[1]):
                out.write(f"{count}\t{name}\n")
        del census
        if os.environ.get("CHAOS_TRACE_COLLECT"):
            _collect(directory, seconds, types=os.environ["CHAOS_TRACE_COLLECT"] == "types")
        with table.open("a") as out:
            row = (
                seconds,
                _rss_kib(),
                traced // 1024,
                peak // 1024,
                *heap,
                threads,
                sys.getallocatedblocks(),
            )
            out.write("\t".join(str(v) for v in row) + "\n")


def _collect(directory: Path, seconds: int, *, types: bool) -> None:
    """A full collection; with `types`, what it found by type, to `garbage-<seconds>.tsv`."""
    if types:
        gc.set_debug(gc.DEBUG_SAVEALL)
    found = gc.collect()
    with (directory / "collected.tsv").open("a") as out:
        out.write(f"{seconds}\t{found}\n")
    if types:
        gc.set_debug(0)
        kinds: dict[str, int] = {}
        for obj in gc.garbage:
            name = type(obj).__qualname__
            kinds[name] = kinds.get(name, 0) + 1
        gc.garbage.clear()
        gc.collect()  # they are garbage again: freed this time
        with (directory / f"garbage-{seconds:04d}.tsv").open("w") as out:
            for name, count in sorted(kinds.items(), key=lambda item: -item[1]):
                out.write(f"{count}\t{name}\n")


def compare(before: str, after: str, top: int = 25) -> None:
    old = tracemalloc.Snapshot.load(before)
    new = tracemalloc.Snapshot.load(after)
    for label, key in (("by line", "lineno"), ("by traceback", "traceback")):
        print(f"== {label}: {before} -> {after}")
        for stat in new.compare_to(old, key)[:top]:
            print(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks  "
                  f"now {stat.size / 1024:10.1f} KiB")  # fmt: skip
            frames = (
                stat.traceback.format()[-16:] if key == "traceback" else [str(stat.traceback[0])]
            )
            for line in frames:
                print("      " + line)


def main() -> None:
    if sys.argv[1:2] == ["--compare"]:
        compare(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 25)
        return
    directory = Path(os.environ["CHAOS_TRACE_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    frames = int(os.environ.get("CHAOS_TRACE_FRAMES", "25"))
    if frames and not tracemalloc.is_tracing():
        tracemalloc.start(frames)
    every = float(os.environ.get("CHAOS_TRACE_EVERY", "20"))
    threading.Thread(target=_record, args=(directory, every), daemon=True).start()
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
