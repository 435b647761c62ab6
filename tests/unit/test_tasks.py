"""Long-running tasks that live and die together (`kube.tasks.run_together`)."""

from __future__ import annotations

import asyncio

import pytest

from ome_routing.kube.tasks import failed_task, run_together


class Broken(Exception):
    pass


async def test_one_task_failing_cancels_and_awaits_the_others_and_raises_its_error() -> None:
    stopped: list[str] = []
    started = asyncio.Event()

    async def sibling(name: str) -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # still running while being cancelled: awaited, not left
            stopped.append(name)

    async def failing() -> None:
        await started.wait()
        raise Broken("watch of TrafficMap: boom")

    with pytest.raises(Broken, match="boom") as raised:
        await run_together({"caches": sibling("caches"), "publisher": sibling("publisher"),
                            "controller": failing()})  # fmt: skip
    assert sorted(stopped) == ["caches", "publisher"]
    assert failed_task(raised.value) == "controller"


async def test_a_task_that_returns_leaves_the_others_running() -> None:
    done = asyncio.Event()

    async def returns() -> None:
        pass

    async def waits() -> None:
        await done.wait()

    together = asyncio.ensure_future(run_together({"short": returns(), "long": waits()}))
    for _ in range(10):  # turns enough for `short` to end and the group to see it
        await asyncio.sleep(0)
    assert not together.done()
    done.set()
    await together


async def test_the_first_failure_is_raised_and_a_later_one_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def first() -> None:
        raise Broken("first")

    async def fails_when_cancelled() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise Broken("while stopping") from None

    with pytest.raises(Broken, match="first"):
        await run_together({"a": fails_when_cancelled(), "b": first()})
    assert "task failed while stopping" in caplog.text
