"""The controller's event loop: uvloop's where installed, asyncio's where it is missing."""

from __future__ import annotations

import asyncio
import sys

import pytest

from ome_routing.observer import eventloop


async def running_loop_name() -> str:
    """`uvloop` or `asyncio`: which loop runs this."""
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def test_the_controller_runs_on_uvloop_when_it_is_installed() -> None:
    pytest.importorskip("uvloop")
    assert eventloop.run(running_loop_name()) == "uvloop"


def test_the_controller_falls_back_to_asyncio_when_uvloop_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` fails
    assert eventloop.loop_factory("uvloop") is None
    assert eventloop.run(running_loop_name()) == "asyncio"


def test_asyncio_can_be_asked_for_by_name() -> None:
    assert eventloop.run(running_loop_name(), "asyncio") == "asyncio"


def test_an_unknown_loop_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown event loop 'tokio'"):
        eventloop.loop_factory("tokio")
