"""Carry items from a producer on another thread (or another event loop) to one asyncio consumer.

The producer calls `put` and finally `close` (with the exception that ended it, if any); the consumer
iterates. Items cross threads with `loop.call_soon_threadsafe`, so the consumer's loop never blocks.
An exception from the producer is raised in the consumer, never swallowed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

T = TypeVar("T")


class _End:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class Channel(Generic[T]):
    """A one-way, thread-safe stream of items into the asyncio loop that created it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[T | _End] = asyncio.Queue()

    def put(self, item: T) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def close(self, error: BaseException | None = None) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, _End(error))

    async def __aiter__(self) -> AsyncIterator[list[T]]:
        """Yield, each time, every item that has arrived since the last yield (at least one).

        A consumer that keeps up gets one item at a time; one that falls behind catches up in one step
        instead of paying its per-item cost (a UI update) for every item.
        """
        while True:
            batch: list[T] = []
            item = await self._queue.get()
            while not isinstance(item, _End):
                batch.append(item)
                if self._queue.empty():
                    break
                item = self._queue.get_nowait()
            if batch:
                yield batch
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
