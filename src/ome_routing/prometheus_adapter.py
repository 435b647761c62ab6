"""prometheus_client where routing needs more than its public API: every use of its internals.

The series that every poll and probe moves count in plain numbers (`LoopCounter`,
`LoopHistogram`): the library keeps each value behind a lock of its own, which costs more
than the rest of the count, and only the event loop's thread counts them. They are the
library's `Counter` and `Histogram` with its hooks for its own metric classes put to
other use: `_metric_init` (a child's values), `_child_samples` (what a child writes out),
`_use_created` (whether `_created` series are written), `_raise_if_not_observable` and
`_upper_bounds`. Nothing else of the project touches them.

`SUPPORTED` is the range of prometheus_client this module was written against, the range
`pyproject.toml` allows; `tests/unit/test_dependency_adapters.py` fails on a version
outside it, or when a hook relied on here changes, and `tests/unit/test_loop_metrics.py`
checks that what these write out is what the library's own classes write out.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable

from prometheus_client import Counter, Histogram
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

#: the versions of prometheus_client this module was written for (`pyproject.toml` pins the same)
SUPPORTED = ">=0.26,<0.27"


class LoopCounter(Counter):
    """A `Counter` counted in a plain number: for series that every poll or probe moves.

    The library keeps each value behind a lock of its own, so that threads may count at
    once; these are only counted from the event loop's thread (the scrape reads them from
    another, as it reads any series: a value it sees may miss the latest count). The
    exposition is the library's own, from the same samples.
    """

    def _metric_init(self) -> None:
        self._count = 0.0
        self._created = time.time()

    def inc(self, amount: float = 1, exemplar: dict[str, str] | None = None) -> None:
        try:
            count = self._count
        except AttributeError:  # a parent with labels: the library's error
            self._raise_if_not_observable()  # type: ignore[no-untyped-call]
            raise
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self._count = count + amount

    def reset(self) -> None:
        self._count = 0.0
        self._created = time.time()

    def _child_samples(self) -> Iterable[Sample]:
        total = Sample("_total", {}, self._count, None, None)
        if prometheus_metrics._use_created:
            return (total, Sample("_created", {}, self._created, None, None))
        return (total,)


class LoopHistogram(Histogram):
    """A `Histogram` counted in plain numbers, as `LoopCounter`: each poll observes two.

    0.17 against 0.72 us an observation (`timeit`).
    """

    def _metric_init(self) -> None:
        self._counts = [0] * len(self._upper_bounds)
        self._total = 0.0
        self._created = time.time()

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        try:
            counts = self._counts
        except AttributeError:  # a parent with labels: the library's error
            self._raise_if_not_observable()  # type: ignore[no-untyped-call]
            raise
        bounds = self._upper_bounds
        # the first bucket whose bound is at least the amount (none for NaN)
        index = bisect_left(bounds, amount)
        if index < len(bounds) and amount <= bounds[index]:
            counts[index] += 1
        self._total += amount

    def _child_samples(self) -> Iterable[Sample]:
        samples = []
        seen = 0.0
        for bound, count in zip(self._upper_bounds, self._counts, strict=True):
            seen += count
            le = floatToGoString(bound)  # type: ignore[no-untyped-call]
            samples.append(Sample("_bucket", {"le": le}, seen, None, None))
        samples.append(Sample("_count", {}, seen, None, None))
        if self._upper_bounds[0] >= 0:
            samples.append(Sample("_sum", {}, self._total, None, None))
        if prometheus_metrics._use_created:
            samples.append(Sample("_created", {}, self._created, None, None))
        return tuple(samples)
