"""The conversations' SQLite database: its tables, created and upgraded in place when the app starts.

Chainlit's SQLAlchemy data layer creates no tables, and the schema in its documentation lacks columns
that Chainlit 2.12 writes (steps: `command`, `modes`, `defaultOpen`, `autoCollapse`, `icon`; elements:
`props`, `autoPlay`, `playerConfig`). `open_database` creates every table with every column, adds the
columns an older database lacks (a database made from the documented schema, or by an earlier version of
this app), and records the version in SQLite's own `user_version`: nothing is ever dropped. A file that
is not a usable database stops the app with one line. Standard library only; knows nothing of Chainlit.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from config.errors import HistoryError

SCHEMA_VERSION = 1
# Every table and column the data layer reads or writes; JSON is stored as text.
TABLES: dict[str, dict[str, str]] = {
    "users": {"id": "TEXT PRIMARY KEY", "identifier": "TEXT NOT NULL UNIQUE", "metadata": "TEXT NOT NULL",
              "createdAt": "TEXT"},
    "threads": {"id": "TEXT PRIMARY KEY", "createdAt": "TEXT", "name": "TEXT", "userId": "TEXT",
                "userIdentifier": "TEXT", "tags": "TEXT", "metadata": "TEXT"},
    "steps": {"id": "TEXT PRIMARY KEY", "name": "TEXT NOT NULL", "type": "TEXT NOT NULL", "threadId": "TEXT NOT NULL",
              "parentId": "TEXT", "streaming": "BOOLEAN NOT NULL", "waitForAnswer": "BOOLEAN", "isError": "BOOLEAN",
              "metadata": "TEXT", "tags": "TEXT", "input": "TEXT", "output": "TEXT", "createdAt": "TEXT",
              "command": "TEXT", "modes": "TEXT", "start": "TEXT", "end": "TEXT", "generation": "TEXT",
              "showInput": "TEXT", "language": "TEXT", "indent": "INT", "defaultOpen": "BOOLEAN",
              "autoCollapse": "BOOLEAN", "icon": "TEXT"},
    "elements": {"id": "TEXT PRIMARY KEY", "threadId": "TEXT", "type": "TEXT", "url": "TEXT", "chainlitKey": "TEXT",
                 "name": "TEXT NOT NULL", "display": "TEXT", "objectKey": "TEXT", "size": "TEXT", "page": "INT",
                 "language": "TEXT", "forId": "TEXT", "mime": "TEXT", "props": "TEXT", "autoPlay": "BOOLEAN",
                 "playerConfig": "TEXT"},
    "feedbacks": {"id": "TEXT PRIMARY KEY", "forId": "TEXT NOT NULL", "threadId": "TEXT NOT NULL",
                  "value": "INT NOT NULL", "comment": "TEXT"},
}
INDEXES = ['CREATE INDEX IF NOT EXISTS steps_thread ON steps ("threadId", "createdAt")',
           'CREATE INDEX IF NOT EXISTS threads_user ON threads ("userId")',
           # The operator's figures read a period of days (`insights`), the daily limit one user's threads.
           'CREATE INDEX IF NOT EXISTS steps_time ON steps ("createdAt")',
           'CREATE INDEX IF NOT EXISTS threads_user_name ON threads ("userIdentifier")',
           'CREATE INDEX IF NOT EXISTS feedbacks_step ON feedbacks ("forId")']


def open_database(path: Path) -> None:
    """Create or upgrade the database at `path` in place; raise `HistoryError` if the file is not usable."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        with sqlite3.connect(path) as connection:
            if connection.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("the integrity check failed")
            # Write-ahead logging: readers never wait for the writer, and writers wait briefly for each other.
            connection.execute("PRAGMA journal_mode=WAL")
            for table, columns in TABLES.items():
                definition = ", ".join(f'"{name}" {kind}' for name, kind in columns.items())
                connection.execute(f'CREATE TABLE IF NOT EXISTS {table} ({definition})')
                present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
                for name, kind in columns.items():
                    if name not in present:  # added later than this database was made: no constraints on an ALTER
                        connection.execute(f'ALTER TABLE {table} ADD COLUMN "{name}" {kind.split()[0]}')
            for index in INDEXES:
                connection.execute(index)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.close()
    except sqlite3.DatabaseError as error:
        raise HistoryError(f"CHAT_DB={path} is not a usable SQLite database ({error}). Move the file away (keep it: "
                           "`sqlite3 FILE .recover` may save its conversations) and start again; a new, empty "
                           "database is created.") from None
    except OSError as error:
        raise HistoryError(f"CHAT_DB={path} cannot be opened ({error}). Check the folder's permissions and free "
                           "space, or set CHAT_DB to another file.") from None
