"""Long-running tasks that live and die together.

`run_together` runs named coroutines in one `asyncio.TaskGroup`: when one fails, the
others are cancelled and awaited before the failure goes on, so a replica whose watch,
reconciler or publisher died stops as a whole (and the command exits non-zero) instead of
leaving its siblings running on a cache nobody keeps, as `asyncio.gather` would.

Errors: the first failure is raised as itself, not wrapped in an `ExceptionGroup`, so
that callers keep matching on its type (`LeadershipLost`, `NotLeader`); it carries a note
naming its task (`failed_task`). Failures of siblings that happened while they were being
cancelled are logged. A task that returns does not stop the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

_NOTE = "in task "


def failed_task(err: BaseException) -> str:
    """The name of the task `err` ended, as `run_together` noted it ("" if none)."""
    for note in getattr(err, "__notes__", ()):
        if note.startswith(_NOTE):
            return str(note[len(_NOTE) :])
    return ""


async def _named(name: str, work: Coroutine[Any, Any, Any]) -> None:
    try:
        await work
    except asyncio.CancelledError:
        raise
    except BaseException as err:
        if not failed_task(err):
            err.add_note(f"{_NOTE}{name}")
        raise


async def run_together(work: dict[str, Coroutine[Any, Any, Any]]) -> None:
    """Run every coroutine of `work` (by task name) until all return or one fails."""
    try:
        async with asyncio.TaskGroup() as group:
            for name, coroutine in work.items():
                group.create_task(_named(name, coroutine), name=name)
    except BaseExceptionGroup as failed:
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        for other in _leaves(failed)[1:]:
            log.error(
                "task failed while stopping",
                extra={"task": failed_task(other), "error": str(other) or type(other).__name__},
            )
        raise first from None


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for err in group.exceptions:
        if isinstance(err, BaseExceptionGroup):
            found.extend(_leaves(err))
        else:
            found.append(err)
    return found
