"""The event loop the controller runs on: uvloop's where it is installed, asyncio's otherwise.

uvloop runs the observer's polls with less CPU each than asyncio's own loop (the
figures are in `bench/poll_throughput`); nothing in the controller depends on it, so
where it is missing (another platform, another Python) asyncio's loop does the same work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: The loops `run` knows, by name.
NAMES = ("uvloop", "asyncio")


def loop_factory(name: str = "uvloop") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A factory of `name`'s loops, or None for asyncio's (also when uvloop is missing)."""
    if name not in NAMES:
        raise ValueError(f"unknown event loop {name!r}: one of {', '.join(NAMES)}")
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            return None
        return uvloop.new_event_loop
    return None


def run(main: Coroutine[Any, Any, T], name: str = "uvloop") -> T:
    """`asyncio.run` on the named loop, or on asyncio's when that one is missing."""
    with asyncio.Runner(loop_factory=loop_factory(name)) as runner:
        return runner.run(main)
