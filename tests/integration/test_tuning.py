"""The garbage-collector settings the controller applies at startup, and the collections
its event loop runs a little and often."""

from __future__ import annotations

import asyncio
import gc
import platform
import weakref
from collections.abc import Iterator

import pytest

from ome_routing.observer import pace_collections, tune_gc
from ome_routing.observer.tuning import (
    BEAT_SECONDS,
    FULL_GROWTH,
    GROWTH_EVERY,
    MIDDLE_THRESHOLD,
    OLD_THRESHOLD,
    TRIM_EVERY,
    YOUNG_THRESHOLD,
    heap_grew,
    heap_trimmer,
)


@pytest.fixture
def gc_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("gc_restored")
def test_tuning_collects_less_often_and_freezes_what_startup_made() -> None:
    survivor = [object()]
    tune_gc()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    assert YOUNG_THRESHOLD > 700
    assert gc.get_freeze_count() > 0
    assert not any(each is survivor for each in gc.get_objects())
    assert survivor


@pytest.mark.usefixtures("gc_restored")
def test_tuning_leaves_full_collections_to_the_event_loop() -> None:
    tune_gc()
    # a full collection starts once this many middle ones have run: never, in practice
    assert gc.get_threshold()[2] >= 10**9


@pytest.mark.usefixtures("gc_restored")
async def test_a_heap_that_does_not_grow_gets_no_full_collection_however_long_it_runs() -> None:
    gc.set_threshold(10**9, 10**9, 10**9)
    generations: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    gc.callbacks.append(seen)
    # more beats than ten minutes' worth at the chart's pace, on a heap of a steady size
    beats = int(900 / BEAT_SECONDS)
    pacer = asyncio.ensure_future(pace_collections(0, blocks=lambda: 1_000))
    try:
        while len(generations) < beats:
            await asyncio.sleep(0)
    finally:
        pacer.cancel()
        gc.callbacks.remove(seen)
        await asyncio.gather(pacer, return_exceptions=True)
    assert set(generations) == {1}


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.mark.usefixtures("gc_restored")
async def test_paced_collections_free_cycles_the_collector_would_not_reach_itself() -> None:
    # the collector's own triggers out of reach: only the beats collect
    gc.set_threshold(10**9, 10**9, 10**9)
    generations: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    first, second = _Node(), _Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second
    gc.callbacks.append(seen)
    pacer = asyncio.ensure_future(pace_collections(0.001))
    try:
        while gone() is not None:
            await asyncio.sleep(0.001)
    finally:
        pacer.cancel()
        gc.callbacks.remove(seen)
        await asyncio.gather(pacer, return_exceptions=True)
    assert generations
    assert set(generations) == {1}


def test_a_full_collection_is_due_once_the_heap_grew_by_a_quarter_since_the_last() -> None:
    assert FULL_GROWTH == 0.25
    assert not heap_grew(1_250, 1_000)
    assert heap_grew(1_251, 1_000)
    assert not heap_grew(900, 1_000)


@pytest.mark.usefixtures("gc_restored")
async def test_cycles_in_the_oldest_generation_are_freed_once_the_heap_has_grown() -> None:
    # the collector's own triggers out of reach: only the heap's growth can bring the
    # full collection that frees the cycle
    gc.set_threshold(10**9, 10**9, 10**9)
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    gc.collect(1)
    gc.collect(1)  # the survivors of two collections of the middle generation: the oldest
    gone = weakref.ref(first)
    del first, second
    sizes = iter([1_000])  # the heap after the last full collection, then a grown one
    generations: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    gc.callbacks.append(seen)
    pacer = asyncio.ensure_future(pace_collections(0.001, blocks=lambda: next(sizes, 2_000)))
    try:
        while len(generations) < 3 * GROWTH_EVERY and gone() is not None:
            await asyncio.sleep(0.001)
    finally:
        pacer.cancel()
        gc.callbacks.remove(seen)
        await asyncio.gather(pacer, return_exceptions=True)
    assert gone() is None
    assert 2 in generations


def test_the_c_heap_is_trimmed_where_glibc_provides_it() -> None:
    trim = heap_trimmer()
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("no glibc: nothing to trim with")
    assert trim is not None
    trim()
    assert TRIM_EVERY * BEAT_SECONDS <= 60
