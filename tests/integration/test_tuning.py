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
    FULL_EVERY,
    MIDDLE_THRESHOLD,
    OLD_THRESHOLD,
    TRIM_EVERY,
    YOUNG_THRESHOLD,
    generation_at,
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


def test_beats_collect_young_and_middle_generations_and_a_full_one_every_so_often() -> None:
    assert [generation_at(beat, full_every=3) for beat in range(1, 8)] == [1, 1, 2, 1, 1, 2, 1]
    assert generation_at(FULL_EVERY) == 2
    assert generation_at(FULL_EVERY - 1) == 1
    # about every ten minutes
    assert 300 <= FULL_EVERY * BEAT_SECONDS <= 1200


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


def test_the_c_heap_is_trimmed_where_glibc_provides_it() -> None:
    trim = heap_trimmer()
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("no glibc: nothing to trim with")
    assert trim is not None
    trim()
    assert TRIM_EVERY * BEAT_SECONDS <= 60
