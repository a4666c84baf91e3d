"""Who changed the guide's documents from the operator's page, and when: each upload, replacement, deletion,
restoration and written answer, with the operator's name, kept in the conversations' database (its own table, which
retention leaves alone) and listed latest first, also as CSV."""

from __future__ import annotations

import csv
import io
import sqlite3
from contextlib import closing
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from pathlib import Path

from insights.report import SpreadsheetSafe

ACTIONS = ("upload", "replace", "delete", "restore", "answer")
COLUMNS = ("at", "operator", "action", "file")
SCHEMA = """CREATE TABLE IF NOT EXISTS operator_activity (id INTEGER PRIMARY KEY, "at" TEXT NOT NULL,
            operator TEXT NOT NULL, action TEXT NOT NULL, file TEXT NOT NULL)"""


@dataclass(frozen=True)
class Change:
    at: str  # UTC, ISO 8601
    operator: str
    action: str  # one of ACTIONS
    file: str


class Activity:
    def __init__(self, database: Path) -> None:
        self.database = database

    def record(self, operator: str, action: str, file: str) -> None:
        with closing(self._connect()) as db, db:
            db.execute("INSERT INTO operator_activity (at, operator, action, file) VALUES (?, ?, ?, ?)",
                       (datetime.now(UTC).isoformat(timespec="seconds"), operator, action, file))

    def latest(self, limit: int | None = None) -> list[Change]:
        with closing(self._connect()) as db:
            rows = db.execute("SELECT at, operator, action, file FROM operator_activity ORDER BY id DESC LIMIT ?",
                              (-1 if limit is None else limit,)).fetchall()
        return [Change(*row) for row in rows]

    def as_csv(self) -> str:
        out = io.StringIO()
        writer = SpreadsheetSafe(csv.writer(out))
        writer.writerow(COLUMNS)
        writer.writerows(astuple(change) for change in self.latest())
        return out.getvalue()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.database, timeout=10)
        db.execute(SCHEMA)
        return db
