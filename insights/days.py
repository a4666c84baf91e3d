"""The stored history one local day at a time, each ended day read once: a year of a busy site's questions stays
quick to count.

A day is read into what the operator's figures add up from: its usage (`insights.usage`), its unanswered questions
(`insights.unanswered`) and the passages its replies drew on (`insights.documents`). A day before yesterday is kept
in memory and read again only when its count of steps or its feedback changed (retention removed a chat, a visitor
rated an old reply); today and yesterday, whose replies may still be being written, are read every time.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from history.records import connect
from insights.documents import sources_on
from insights.unanswered import Asked, asked_on
from insights.usage import DayUsage, Usage, combined, day_usage, utc_bound

log = logging.getLogger(__name__)
# What changes when a day's stored figures change: its steps, and its replies' feedback (a value changed or a
# rating removed moves the sum of rowid × (value + 1)). The feedback's join starts from the few ratings.
STEPS_OF_DAY = 'SELECT count(*) FROM steps WHERE "createdAt" >= :start AND "createdAt" < :end'
FEEDBACK_OF_DAYS = '''
    SELECT date(s."createdAt", 'localtime') AS day, count(*), sum(f.rowid * (f."value" + 1))
    FROM feedbacks f CROSS JOIN steps s ON s."id" = f."forId"
    WHERE s."createdAt" >= :start AND s."createdAt" < :end GROUP BY day'''


@dataclass
class Day:
    usage: DayUsage
    asked: list[Asked]  # its unanswered questions
    documents: Counter[str] = field(default_factory=Counter)  # the replies that drew on each document
    passages: Counter[str] = field(default_factory=Counter)  # and on each passage
    questions: Counter[tuple[str, str]] = field(default_factory=Counter)  # (document, question): replies


class Days:
    """The days of the conversations' database; a chat that named no persona had `default_persona`."""

    def __init__(self, database: Path, default_persona: str = "-") -> None:
        self.database, self.default_persona = database, default_persona
        self._kept: dict[date, tuple[tuple, Day]] = {}  # an ended day: what it was read at, and its figures
        self._lock = threading.Lock()  # one reader at a time: two page loads never read a day twice

    def days(self, since: date, until: date, today: date | None = None) -> dict[date, Day]:
        """Every day from `since` to `until` (excluded), in order."""
        ended = (today or date.today()) - timedelta(days=1)
        with self._lock, closing(connect(self.database)) as connection:
            period = {"start": utc_bound(since), "end": utc_bound(until)}
            feedback = {row[0]: tuple(row[1:]) for row in connection.execute(FEEDBACK_OF_DAYS, period)}
            days = {}
            for day in (since + timedelta(days=offset) for offset in range((until - since).days)):
                bounds = {"start": utc_bound(day), "end": utc_bound(day + timedelta(days=1))}
                mark = (connection.execute(STEPS_OF_DAY, bounds).fetchone()[0], *feedback.get(str(day), ()))
                kept = self._kept.get(day) if day < ended else None
                if kept is None or kept[0] != mark:
                    kept = (mark, self._read(connection, bounds) if mark[0] else Day(DayUsage.empty(), []))
                    if day < ended and mark[0]:  # an empty day costs its count alone: not kept
                        self._kept[day] = kept
                days[day] = kept[1]
        return days

    def read_ahead(self, days: int = 365) -> None:
        """Read the last `days` days now, so that the operator's first look at them is quick too."""
        try:
            self.days(date.today() - timedelta(days=days - 1), date.today() + timedelta(days=1))
        except sqlite3.Error as error:  # the page reads them when asked instead
            log.warning("Operator's page: reading the last %d days ahead failed: %s", days, error)

    def usage(self, since: date, until: date) -> Usage:
        return combined({day: figures.usage for day, figures in self.days(since, until).items()})

    def _read(self, connection: sqlite3.Connection, bounds: dict[str, str]) -> Day:
        return Day(day_usage(connection, bounds, self.default_persona),
                   asked_on(connection, bounds, self.default_persona), *sources_on(connection, bounds))
