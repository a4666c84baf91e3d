"""The operator's side of the stored conversations: read them back for export, and delete the ones idle too long.

A conversation's time is its last activity: its newest step, or its creation when it has none. Times are
Chainlit's, ISO 8601 in UTC, so they compare as text. Standard library only (sqlite3), synchronous: the
export command runs on its own, and the app runs the retention at start and in a thread once a day.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from config.errors import HistoryError
from history.conversation import REPLY

LAST_ACTIVITY = '''COALESCE((SELECT MAX(s."createdAt") FROM steps s WHERE s."threadId" = t."id"), t."createdAt")'''


@dataclass
class Record:
    """One conversation as exported: who, when, with which persona, and what was said."""

    id: str
    name: str | None
    user: str | None
    created: str | None
    last_activity: str | None
    persona: str | None
    messages: list[dict] = field(default_factory=list)  # {"role", "content", "created"}


def configured_database() -> Path:
    """The database the app's settings name, for the operator's commands; a clear error while there is none."""
    from config.settings import load_env_file, load_settings

    load_env_file()
    database = load_settings().database
    if not database.is_file():
        raise HistoryError(f"There is no database at {database} yet (CHAT_DB, CHAT_STATE_DIR): the app creates it "
                           "when it starts.")
    return database


def connect(database: Path) -> sqlite3.Connection:
    """The database, for the operator's reads (rows by column name) and retention's deletes; never created here."""
    connection = sqlite3.connect(f"file:{database}?mode=rw", uri=True, timeout=10)
    connection.row_factory = sqlite3.Row
    return connection


def read_records(database: Path, thread_id: str | None = None, user: str | None = None, since: str | None = None,
                 until: str | None = None) -> list[Record]:
    """Conversations, oldest first: one by id, or a user's, or all; optionally last active in [since, until)."""
    conditions, parameters = [], {}
    for name, value, condition in (("thread", thread_id, 't."id" = :thread'),
                                   ("user", user, 't."userIdentifier" = :user'),
                                   ("since", since, f"{LAST_ACTIVITY} >= :since"),
                                   ("until", until, f"{LAST_ACTIVITY} < :until")):
        if value is not None:
            conditions.append(condition)
            parameters[name] = value
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    with connect(database) as connection:
        threads = connection.execute(f'SELECT t.*, {LAST_ACTIVITY} AS last FROM threads t {where} ORDER BY last',
                                     parameters).fetchall()
        records = []
        for thread in threads:
            metadata = json.loads(thread["metadata"] or "{}")
            record = Record(thread["id"], thread["name"], thread["userIdentifier"], thread["createdAt"],
                            thread["last"], metadata.get("chat_profile"))
            for step in connection.execute('SELECT * FROM steps WHERE "threadId" = ? ORDER BY "createdAt"',
                                           (thread["id"],)):
                if step["type"] == "user_message":
                    record.messages.append({"role": "user", "content": step["output"], "created": step["createdAt"]})
                elif step["type"] == "assistant_message" and REPLY in json.loads(step["metadata"] or "{}"):
                    record.messages.append({"role": "assistant", "content": step["output"],
                                            "created": step["createdAt"]})
            records.append(record)
    connection.close()
    return records


def forget_idle(database: Path, days: int, now: datetime | None = None) -> int:
    """Delete the conversations whose last activity is more than `days` days ago; returns how many."""
    cutoff = ((now or datetime.now(UTC)) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S")
    with connect(database) as connection:
        idle = [row[0] for row in connection.execute(f'SELECT t."id" FROM threads t WHERE {LAST_ACTIVITY} < :cutoff',
                                                     {"cutoff": cutoff})]
        for table, column in (("feedbacks", "threadId"), ("elements", "threadId"), ("steps", "threadId"),
                              ("threads", "id")):
            connection.executemany(f'DELETE FROM {table} WHERE "{column}" = ?', [(thread,) for thread in idle])
    connection.close()
    return len(idle)
