"""When a home is polled: a stable first offset, then every `period`.

After a restart every home would otherwise be due at once. Each home's first poll is
instead placed within the first period by a hash of its key that does not change
between processes (Python's `hash` does), so the load spreads evenly and stays where
it was. Pure arithmetic on loop-clock seconds; the observer does the waiting.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable

_SPAN = float(1 << 64)


def stable_fraction(key: Hashable) -> float:
    """A number in [0, 1) that depends only on `repr(key)`, the same in every process."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SPAN


def first_offset(key: Hashable, period: float) -> float:
    """Seconds from a home's start to its first poll: within [0, period)."""
    return stable_fraction(key) * period


def next_due(due: float, period: float, now: float) -> float:
    """The poll after the one due at `due`: one period later, or now if that has passed.

    A poll that ran late (a long wait for a request slot) is followed by the next one
    at once, not by a burst of the polls it missed.
    """
    following = due + period
    return following if following > now else now
