"""Work the app starts and does not wait for: each task kept until it ends (the event loop holds only a weak
reference, so a task nobody keeps may be collected mid-way) and its failure logged with the task's name, not lost."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine

log = logging.getLogger("app")
_running: set[asyncio.Task] = set()


def in_background(work: Coroutine, name: str) -> asyncio.Task:
    task = asyncio.create_task(work, name=name)
    _running.add(task)
    task.add_done_callback(_ended)
    return task


def _ended(task: asyncio.Task) -> None:
    _running.discard(task)
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("%s failed", task.get_name(), exc_info=error)
