"""Chainlit's SQLAlchemy data layer on the app's SQLite file, with what it lacks for SQLite and for faults.

Chainlit 2.12's `SQLAlchemyDataLayer` binds lists and dicts (thread tags, step modes) as they are, which
SQLite rejects; returns JSON columns as strings; inserts every key of a step as a column; warns for
every element when no file storage is configured; and turns every SQL error into a warning and returns
nothing, so a conversation that could not be saved is silently lost. `ChatStore` fixes these: JSON in
and out, only known columns written (`history.schema`), elements not stored (they hold the sidebar and
reply footers, which are re-measured; the footer's figures are in the reply's metadata), and a write
that fails because the database is locked, read-only or full is kept in order in a backlog and written
when the database takes writes again, as long as the app runs. `pending()` tells the app, which tells
the visitor. All SQL runs in aiosqlite's thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from pathlib import Path
from typing import Any

from chainlit.data.sql_alchemy import SQLAlchemyDataLayer
from sqlalchemy import text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from history.schema import TABLES

log = logging.getLogger(__name__)
JSON_COLUMNS = {"metadata", "tags", "generation", "modes", "thread_metadata", "thread_tags", "step_metadata",
                "step_tags", "step_generation"}
RETRY_INTERVAL = 2.0  # seconds between attempts to write the backlog
# Seconds a write waits for another process's lock (a backup, a stuck writer) before it counts as failed.
# The app's own writes never wait for each other: they take turns (`_writing`).
BUSY_TIMEOUT = 3.0


class ChatStore(SQLAlchemyDataLayer):
    def __init__(self, path: Path) -> None:
        super().__init__(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": BUSY_TIMEOUT})
        self._backlog: deque[tuple[str, dict]] = deque()
        self._retrying: asyncio.Task | None = None
        self._writing = asyncio.Lock()
        self._in_flight = 0
        self._settled = asyncio.Event()
        self._settled.set()

    def pending(self) -> int:
        """Writes that failed and wait in the backlog for the database to take them."""
        return len(self._backlog)

    async def settled(self, timeout: float = 2 * BUSY_TIMEOUT + 1) -> None:
        """Wait until no write is under way (each one has either landed or joined the backlog)."""
        try:
            await asyncio.wait_for(self._settled.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def execute_sql(self, query: str, parameters: dict) -> list[dict[str, Any]] | int | None:
        parameters = {key: json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else value
                      for key, value in parameters.items()}
        if not _is_write(query):
            try:
                return await self._run(query, parameters)
            except SQLAlchemyError as error:
                log.error("Reading the conversations' database failed: %s", error)
                return None
        self._in_flight += 1
        self._settled.clear()
        try:
            async with self._writing:
                return await self._write(query, parameters)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._settled.set()

    async def _write(self, query: str, parameters: dict) -> int | None:
        """One write, its turn taken: done now, or kept in the backlog after the writes that wait already."""
        if self._backlog:  # nothing overtakes a write that waits
            self._backlog.append((query, parameters))
            return None
        try:
            return await self._run(query, parameters)
        except OperationalError as error:  # locked, read-only, full, I/O: worth trying again later
            log.error("The conversation could not be saved (%s); it is kept and written when the database "
                      "takes writes again", error.orig)
            self._backlog.append((query, parameters))
            if self._retrying is None or self._retrying.done():
                self._retrying = asyncio.create_task(self._write_backlog())
        except SQLAlchemyError as error:
            log.error("A write to the conversations' database was refused and dropped: %s", error)
        return None

    async def _run(self, query: str, parameters: dict) -> list[dict[str, Any]] | int:
        async with self.async_session() as session, session.begin():
            result = await session.execute(text(query), parameters)
            if not result.returns_rows:
                return result.rowcount
            return [{key: _from_json(key, value) for key, value in self.clean_result(dict(row._mapping)).items()}
                    for row in result.fetchall()]

    async def _write_backlog(self) -> None:
        written = 0
        while self._backlog:
            await asyncio.sleep(RETRY_INTERVAL)
            while self._backlog:
                query, parameters = self._backlog[0]
                try:
                    async with self._writing:
                        await self._run(query, parameters)
                except OperationalError:
                    break  # still failing: try again later, in the same order
                except SQLAlchemyError as error:
                    log.error("A waiting write was refused and dropped: %s", error)
                self._backlog.popleft()
                written += 1
        log.info("The conversations' database takes writes again: %d waiting writes saved", written)

    async def create_step(self, step_dict: dict) -> None:
        # Only the columns the schema has: Chainlit adds keys between releases.
        await super().create_step({key: value for key, value in step_dict.items() if key in TABLES["steps"]})

    async def create_element(self, element: object) -> None:
        """Elements are not stored (no file storage here); see the module's docstring."""

    async def delete_steps_after(self, thread_id: str, step_id: str) -> None:
        """Delete what the thread holds after step `step_id` (an edited question runs again from there)."""
        await self.execute_sql('DELETE FROM steps WHERE "threadId" = :thread AND "createdAt" > '
                               '(SELECT "createdAt" FROM steps WHERE "id" = :step)',
                               {"thread": thread_id, "step": step_id})


def _is_write(query: str) -> bool:
    return query.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE")


def _from_json(column: str, value: object) -> object:
    if column in JSON_COLUMNS and isinstance(value, str) and value[:1] in ("{", "["):
        return json.loads(value)
    return value
