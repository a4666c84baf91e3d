"""Chainlit's SQLAlchemy data layer on the app's SQLite file, with what it lacks for SQLite and for faults.

Chainlit 2.12's `SQLAlchemyDataLayer` binds lists and dicts (thread tags, step modes) as they are, which
SQLite rejects; returns JSON columns as strings; inserts every key of a step as a column; warns for
every element when no file storage is configured; and turns every SQL error into a warning and returns
nothing, so a conversation that could not be saved is silently lost. `ChatStore` fixes these: JSON in
and out, only known columns written (`history.schema`), elements not stored (they hold the sidebar and
reply footers, which are re-measured; the footer's figures are in the reply's metadata), and a write
that fails because the database is locked, read-only or full is kept in order in a backlog and written
when the database takes writes again, as long as the app runs (at most `MAX_BACKLOG` of them; an error
that waiting cannot cure, such as a missing column, drops the write with a log line instead of blocking
every later one). `pending()` tells the app, which tells the visitor. All SQL runs in aiosqlite's thread,
off the event loop.

It also closes what Chainlit's layer leaves open to a crafted request: thread ids that are not UUIDs are
refused, every query binds its values (Chainlit pastes thread ids into the text of two queries), a step
never moves to another thread however its id was chosen, nor is deleted or forgotten from one other than the
chat's own, a thread's owner never changes, and the history list reads threads without their steps.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from pathlib import Path
from typing import Any

from chainlit.context import ChainlitContextException, context
from chainlit.data.sql_alchemy import SQLAlchemyDataLayer
from chainlit.data.utils import queue_until_user_message
from chainlit.types import PageInfo, PaginatedResponse, Pagination, ThreadDict, ThreadFilter
from sqlalchemy import text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from history.ids import is_uuid
from history.schema import TABLES

log = logging.getLogger(__name__)
JSON_COLUMNS = {"metadata", "tags", "generation", "modes", "thread_metadata", "thread_tags", "step_metadata",
                "step_tags", "step_generation"}
RETRY_INTERVAL = 2.0  # seconds between attempts to write the backlog
# Seconds a write waits for another process's lock (a backup, a stuck writer) before it counts as failed.
# The app's own writes never wait for each other: they take turns (`_writing`).
BUSY_TIMEOUT = 3.0
MAX_BACKLOG = 10_000  # unsaved writes kept while the database refuses them; later ones are dropped and logged
# What SQLite says when waiting may help (a lock, a full or read-only disk); any other OperationalError
# (a missing table or column) fails the same way every time.
PASSING_ERRORS = ("locked", "busy", "readonly", "read-only", "full", "disk i/o", "unable to open")
MAX_REFUSED = 1_000  # refused questions remembered (each stays out of the database)
STEP_COLUMNS = ", ".join(f's."{column}"' for column in TABLES["steps"])


class ChatStore(SQLAlchemyDataLayer):
    def __init__(self, path: Path) -> None:
        super().__init__(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": BUSY_TIMEOUT})
        self._backlog: deque[tuple[str, dict]] = deque()
        self._retrying: asyncio.Task | None = None
        self._writing = asyncio.Lock()
        self._in_flight = 0
        self._settled = asyncio.Event()
        self._settled.set()
        # Questions the app refused, never to be stored (newest last), by (thread, step).
        self._refused_steps: dict[tuple[str, str], None] = {}

    def pending(self) -> int:
        """Writes that failed and wait in the backlog for the database to take them."""
        return len(self._backlog)

    async def settled(self, timeout: float = 2 * BUSY_TIMEOUT + 1) -> None:
        """Wait until no write is under way (each one has either landed or joined the backlog)."""
        try:
            await asyncio.wait_for(self._settled.wait(), timeout)
        except TimeoutError:
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
            self._to_backlog(query, parameters)
            return None
        try:
            return await self._run(query, parameters)
        except OperationalError as error:
            if not _passes(error):
                log.error("A write to the conversations' database failed and was dropped: %s", error.orig)
                return None
            log.error("The conversation could not be saved (%s); it is kept and written when the database "
                      "takes writes again", error.orig)
            self._to_backlog(query, parameters)
        except SQLAlchemyError as error:
            log.error("A write to the conversations' database was refused and dropped: %s", error)
        return None

    def _to_backlog(self, query: str, parameters: dict) -> None:
        """Put a write in the backlog (if there is room) and make sure a task is writing it."""
        if len(self._backlog) >= MAX_BACKLOG:
            log.error("%d writes already wait for the conversations' database; this one is dropped", MAX_BACKLOG)
        else:
            self._backlog.append((query, parameters))
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.create_task(self._write_backlog())

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
                except OperationalError as error:
                    if _passes(error):
                        break  # still failing: try again later, in the same order
                    log.error("A waiting write failed and was dropped: %s", error.orig)
                except Exception as error:  # noqa: BLE001 - one bad write must not end the retries for all others
                    log.error("A waiting write was refused and dropped: %s", error)
                self._backlog.popleft()
                written += 1
        log.info("The conversations' database takes writes again: %d waiting writes saved", written)

    async def update_thread(self, thread_id: str, name: str | None = None, user_id: str | None = None,
                            metadata: dict | None = None, tags: list[str] | None = None) -> None:
        if not is_uuid(thread_id):
            log.warning("Refused to write thread %.60r: not a UUID", thread_id)
            return
        if user_id is not None:
            owner = await self.execute_sql('SELECT "userId" FROM threads WHERE "id" = :id', {"id": thread_id})
            if owner and owner[0]["userId"] not in (None, user_id):
                log.warning("Refused to give thread %s to another user", thread_id)
                return
        await super().update_thread(thread_id, name, user_id, metadata, tags)

    async def get_thread_author(self, thread_id: str) -> str:
        """The thread's user, or "" when there is no such thread: Chainlit's endpoints then answer 404, where
        its own method raises and they answer 500."""
        rows = await self.execute_sql('SELECT "userIdentifier" FROM threads WHERE "id" = :id', {"id": thread_id})
        return (rows[0]["userIdentifier"] if rows else None) or ""

    @queue_until_user_message()
    async def create_step(self, step_dict: dict) -> None:
        """Insert or update a step. Only the columns the schema has (Chainlit adds keys between releases), and an
        update only within the step's own thread: a step id chosen by a visitor cannot reach another thread."""
        if not is_uuid(step_dict.get("threadId")):
            log.warning("Refused to store a step of thread %.60r: not a UUID", step_dict.get("threadId"))
            return
        await self.update_thread(step_dict["threadId"])
        if (step_dict["threadId"], step_dict.get("id")) in self._refused_steps:  # checked after the last wait: the
            return  # write below then queues before any later `forget_step`'s delete
        step = {key: value for key, value in step_dict.items()
                if key in TABLES["steps"] and value is not None and value != {}}
        if "showInput" in step_dict:
            step["showInput"] = str(step_dict["showInput"]).lower()
        step["metadata"] = step_dict.get("metadata") or {}
        step["generation"] = step_dict.get("generation") or {}
        columns = ", ".join(f'"{key}"' for key in step)
        values = ", ".join(f":{key}" for key in step)
        updates = ", ".join(f'"{key}" = excluded."{key}"' for key in step if key != "id")
        await self.execute_sql(f'INSERT INTO steps ({columns}) VALUES ({values}) ON CONFLICT ("id") DO UPDATE '
                               f'SET {updates} WHERE steps."threadId" = excluded."threadId"', step)

    async def thread_exists(self, thread_id: str) -> bool:
        return bool(await self.execute_sql('SELECT 1 FROM threads WHERE "id" = :id', {"id": thread_id}))

    async def forget_step(self, thread_id: str, step_id: str) -> None:
        """Remove a question the app refused (too long) from its thread and keep it out: Chainlit stores a question
        before the app sees it, in a task of its own that may still be under way. Only within `thread_id`: the id is
        the visitor's choice, and may name a step of someone else's thread."""
        self._refused_steps[(thread_id, step_id)] = None
        while len(self._refused_steps) > MAX_REFUSED:
            del self._refused_steps[next(iter(self._refused_steps))]
        await self.execute_sql('DELETE FROM steps WHERE "id" = :id AND "threadId" = :thread',
                               {"id": step_id, "thread": thread_id})

    def store_again(self, thread_id: str, step_id: str) -> bool:
        """A refused question was edited and taken after all: store it again from now on (True if it was refused)."""
        return self._refused_steps.pop((thread_id, step_id), 0) is None

    async def delete_step(self, step_id: str) -> None:
        """Chainlit removes a message (an edit drops the ones after it): only from the chat's own thread, whose id
        comes from the session, never from the message."""
        try:
            thread_id = context.session.thread_id
        except ChainlitContextException:
            log.warning("Refused to delete step %.60r outside a chat session", step_id)
            return
        owned = 'IN (SELECT "id" FROM steps WHERE "id" = :id AND "threadId" = :thread)'
        parameters = {"id": step_id, "thread": thread_id}
        await self.execute_sql(f'DELETE FROM feedbacks WHERE "forId" {owned}', parameters)
        await self.execute_sql('DELETE FROM steps WHERE "id" = :id AND "threadId" = :thread', parameters)

    async def get_all_user_threads(self, user_id: str | None = None,
                                   thread_id: str | None = None) -> list[ThreadDict] | None:
        """One thread by id, or a user's (at most `user_thread_limit`), with their steps: every value bound."""
        if thread_id is not None and not is_uuid(thread_id):
            return []
        threads = await self._threads('t."userId" = :user OR t."id" = :thread', {"user": user_id, "thread": thread_id})
        if not threads:
            return threads
        ids = {f"thread{index}": thread["id"] for index, thread in enumerate(threads)}
        rows = await self.execute_sql(
            f'SELECT {STEP_COLUMNS}, f."id" AS feedback_id, f."value" AS feedback_value, '
            f'f."comment" AS feedback_comment FROM steps s LEFT JOIN feedbacks f ON s."id" = f."forId" '
            f'WHERE s."threadId" IN ({", ".join(f":{key}" for key in ids)}) ORDER BY s."createdAt"', ids)
        by_id = {thread["id"]: thread for thread in threads}
        for row in rows or []:
            feedback = {key: row.pop(f"feedback_{key}") for key in ("id", "value", "comment")}
            if feedback["value"] is not None:
                row["feedback"] = {**feedback, "forId": row["id"]}
            if row.get("showInput") in (None, "false"):
                row["input"] = ""
            row["metadata"] = row.get("metadata") or {}
            by_id[row["threadId"]]["steps"].append(row)
        return threads

    async def list_threads(self, pagination: Pagination, filters: ThreadFilter) -> PaginatedResponse:
        """The history list: a user's threads, newest activity first, without their steps (a search looks into
        the steps in SQL), one page at a time."""
        if not filters.userId:
            raise ValueError("userId is required")
        conditions, parameters = ['t."userId" = :user'], {"user": filters.userId}
        if filters.search:
            conditions.append('EXISTS (SELECT 1 FROM steps s WHERE s."threadId" = t."id" AND s."output" LIKE :search '
                              "ESCAPE '\\')")
            parameters["search"] = "%" + "".join("\\" + c if c in "%_\\" else c for c in filters.search) + "%"
        if filters.feedback is not None:
            conditions.append('EXISTS (SELECT 1 FROM feedbacks f JOIN steps s ON s."id" = f."forId" '
                              'WHERE s."threadId" = t."id" AND f."value" = :feedback)')
            parameters["feedback"] = int(filters.feedback)
        threads = await self._threads(" AND ".join(conditions), parameters) or []
        ids = [thread["id"] for thread in threads]
        start = ids.index(pagination.cursor) + 1 if pagination.cursor in ids else 0
        page = threads[start:start + max(0, pagination.first)]
        return PaginatedResponse(
            pageInfo=PageInfo(hasNextPage=len(threads) > start + len(page), startCursor=page[0]["id"] if page else None,
                              endCursor=page[-1]["id"] if page else None),
            data=page)

    async def _threads(self, condition: str, parameters: dict) -> list[ThreadDict] | None:
        rows = await self.execute_sql(
            'SELECT t."id", t."createdAt", t."name", t."userId", t."userIdentifier", t."tags", t."metadata", '
            '(SELECT MAX(s."createdAt") FROM steps s WHERE s."threadId" = t."id") AS "updatedAt" '
            f'FROM threads t WHERE {condition} ORDER BY "updatedAt" DESC NULLS LAST, t."id" LIMIT :limit',
            {**parameters, "limit": self.user_thread_limit})
        if not isinstance(rows, list):
            return None
        return [ThreadDict(id=row["id"], createdAt=row["createdAt"], name=row["name"], userId=row["userId"],
                           userIdentifier=row["userIdentifier"], tags=row["tags"], metadata=row["metadata"],
                           steps=[], elements=[]) for row in rows]

    async def create_element(self, element: object) -> None:
        """Elements are not stored (no file storage here); see the module's docstring."""

    async def delete_steps_after(self, thread_id: str, step_id: str) -> None:
        """Delete what the thread holds after step `step_id` (an edited question runs again from there)."""
        await self.execute_sql('DELETE FROM steps WHERE "threadId" = :thread AND "createdAt" > '
                               '(SELECT "createdAt" FROM steps WHERE "id" = :step AND "threadId" = :thread)',
                               {"thread": thread_id, "step": step_id})


def _is_write(query: str) -> bool:
    return query.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE")


def _passes(error: OperationalError) -> bool:
    """Whether the database may take this write later (see `PASSING_ERRORS`)."""
    return any(word in str(error.orig).lower() for word in PASSING_ERRORS)


def _from_json(column: str, value: object) -> object:
    if column in JSON_COLUMNS and isinstance(value, str) and value[:1] in ("{", "["):
        return json.loads(value)
    return value
