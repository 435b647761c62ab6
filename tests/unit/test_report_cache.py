"""The observer's reading of report bodies: identical short bodies are parsed once."""

from __future__ import annotations

import pytest

from ome_routing.core.report import INVALID_PREFIX, ReportError, parse_report
from ome_routing.observer.flight import ReportCache

BODY = b'{"servable": 4, "observedAt": "2026-09-28T10:00:00Z"}'


def test_identical_bodies_share_one_reading() -> None:
    cache = ReportCache()
    first = cache.read(BODY)
    assert first == parse_report(BODY)
    assert cache.read(bytes(bytearray(BODY))) is first


def test_an_invalid_body_fails_with_its_reason_every_time() -> None:
    cache = ReportCache()
    for _ in range(2):
        with pytest.raises(ReportError) as failed:
            cache.read(b'{"servable": 4,')
        assert failed.value.reason.startswith(INVALID_PREFIX)


def test_a_long_body_is_read_but_not_kept() -> None:
    cache = ReportCache()
    long = BODY[:-1] + b"," + b" " * 600 + b'"note": "x"}'
    assert cache.read(long) == cache.read(long)
    assert cache.read(long) is not cache.read(long)


def test_a_full_cache_starts_over_and_still_reads_every_body() -> None:
    cache = ReportCache()
    bodies = [
        f'{{"servable": {n}, "observedAt": "2026-09-28T10:00:00Z"}}'.encode() for n in range(1500)
    ]
    assert [cache.read(body).servable for body in bodies] == list(range(1500))
    assert cache.read(bodies[-1]) is cache.read(bodies[-1])
