"""The garbage-collector settings the controller applies at startup."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ome_routing.observer import tune_gc
from ome_routing.observer.tuning import MIDDLE_THRESHOLD, OLD_THRESHOLD, YOUNG_THRESHOLD


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
