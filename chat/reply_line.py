"""How many replies generate at once, and who waits: a first-come, first-served line.

vLLM batches every running request, so more replies at once raise total throughput but slow each
one; past `limit`, a reply waits for a free place instead, and learns its place in the line whenever it
changes. Lives on the web server's event loop; knows nothing of Chainlit or vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

PLACE_CHECK_INTERVAL = 0.5  # seconds between checks of a waiting reply's place in the line


class ReplyLine:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self._line: list[asyncio.Event] = []  # waiting replies, first come first

    @property
    def waiting(self) -> int:
        return len(self._line)

    @contextlib.asynccontextmanager
    async def place(self, show_place: Callable[[int], Awaitable[None]]) -> AsyncIterator[None]:
        """Hold one of the `limit` places for the body; meanwhile call `show_place(n)` (1 = next) on changes."""
        if self.running < self.limit and not self._line:
            self.running += 1
        else:
            await self._wait_in_line(show_place)
        try:
            yield
        finally:
            self._release()

    async def _wait_in_line(self, show_place: Callable[[int], Awaitable[None]]) -> None:
        ticket = asyncio.Event()
        self._line.append(ticket)
        shown = 0
        try:
            while not ticket.is_set():
                place = self._line.index(ticket) + 1
                if place != shown:
                    shown = place
                    await show_place(place)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(ticket.wait(), PLACE_CHECK_INTERVAL)
        except BaseException:  # stopped or disconnected while waiting
            if ticket.is_set():
                self._release()  # handed a place at the last moment: pass it on
            else:
                self._line.remove(ticket)
            raise

    def _release(self) -> None:
        if self._line:
            self._line.pop(0).set()  # the place goes straight to the next in line
        else:
            self.running -= 1
