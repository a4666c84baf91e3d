"""`python -m history.usage`: what visitors asked and how the replies went, counted from the stored conversations.

For a period of days (`--days 7`, or `--since 2026-11-01 --until 2026-12-01`, the end excluded; days are this
machine's local days): questions per day and per hour, chats, logged-in users (visitors without logins are not told
apart), replies stopped, thumbs up and down, tokens in and out, first-token and reply times (p50, p95), and the
questions, chats and tokens per persona. Printed as JSON, or as CSV of the days (`--csv`). Everything is read from
the SQLite history, so the figures survive restarts and keep only what retention (`CHAT_HISTORY_DAYS`) keeps; a
reply counts from the figures stored with it (`chat.reply_message`), so replies stored by an earlier version
count as questions and chats only. Standard library only (sqlite3), read-only, also while the app runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import sys
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta

from config.errors import ChatError, HistoryError, cannot
from history.conversation import REPLY
from history.records import configured_database, connect

DAY_COLUMNS = ("day", "questions", "chats", "users", "stopped", "thumbs_up", "thumbs_down", "tokens_in", "tokens_out")
# The steps of the period with their day and hour in local time; replies with the figures stored in their metadata.
STEPS = f'''
    SELECT s."type", s."threadId", t."userIdentifier" AS user, json_extract(t."metadata", '$.chat_profile') AS persona,
           date(s."createdAt", 'localtime') AS day, CAST(strftime('%H', s."createdAt", 'localtime') AS INT) AS hour,
           json_extract(s."metadata", '$.{REPLY}.prompt_tokens') AS tokens_in,
           json_extract(s."metadata", '$.{REPLY}.generated_tokens') AS tokens_out,
           json_extract(s."metadata", '$.{REPLY}.ttft_s') AS first_token_s,
           json_extract(s."metadata", '$.{REPLY}.reply_s') AS reply_s,
           json_extract(s."metadata", '$.{REPLY}.finish') AS finish,
           f."value" AS feedback
    FROM steps s JOIN threads t ON t."id" = s."threadId" LEFT JOIN feedbacks f ON f."forId" = s."id"
    WHERE date(s."createdAt", 'localtime') >= :since AND date(s."createdAt", 'localtime') < :until
      AND (s."type" = 'user_message' OR json_extract(s."metadata", '$.{REPLY}') IS NOT NULL)'''


@dataclass
class Tally:
    """The counts of one day, one persona or the whole period."""

    questions: int = 0
    chats: int = 0
    users: int = 0
    stopped: int = 0
    thumbs_up: int = 0
    thumbs_down: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


@dataclass
class Usage:
    since: str
    until: str  # excluded
    total: Tally
    days: dict[str, Tally]  # every day of the period, also those without a question
    hours: list[int]  # questions per hour of the day, 0 to 23
    personas: dict[str, Tally]
    first_token_s: dict[str, float | None] = field(default_factory=dict)  # p50, p95
    reply_s: dict[str, float | None] = field(default_factory=dict)


def usage(database, since: date, until: date) -> Usage:
    """The figures of the days from `since` to `until` (excluded), read from the conversations' database."""
    days = {str(since + timedelta(days=offset)): Tally() for offset in range((until - since).days)}
    total, personas, hours = Tally(), {}, [0] * 24
    chats: dict[str, set] = {}  # the threads and users seen per day, persona and in all
    users: dict[str, set] = {}
    first_tokens, replies = [], []
    with connect(database) as connection:
        rows = connection.execute(STEPS, {"since": str(since), "until": str(until)}).fetchall()
    connection.close()
    for row in rows:
        persona = row["persona"] or "-"
        tallies = {"": total, row["day"]: days.setdefault(row["day"], Tally()),
                   f"persona:{persona}": personas.setdefault(persona, Tally())}
        for key, tally in tallies.items():
            chats.setdefault(key, set()).add(row["threadId"])
            if row["user"]:
                users.setdefault(key, set()).add(row["user"])
            if row["type"] == "user_message":
                tally.questions += 1
            else:
                tally.tokens_in += row["tokens_in"] or 0
                tally.tokens_out += row["tokens_out"] or 0
                tally.stopped += row["finish"] == "abort"
                tally.thumbs_up += row["feedback"] == 1
                tally.thumbs_down += row["feedback"] == 0
        if row["type"] == "user_message":
            hours[row["hour"]] += 1
        else:
            first_tokens += [row["first_token_s"]] if row["first_token_s"] is not None else []
            replies += [row["reply_s"]] if row["reply_s"] is not None else []
    for key, tally in {"": total, **days, **{f"persona:{name}": tally for name, tally in personas.items()}}.items():
        tally.chats, tally.users = len(chats.get(key, ())), len(users.get(key, ()))
    return Usage(str(since), str(until), total, dict(sorted(days.items())), hours, personas,
                 percentiles(first_tokens), percentiles(replies))


def percentiles(values: list[float]) -> dict[str, float | None]:
    """The median and the 95th percentile (nearest rank), None without values."""
    ordered = sorted(values)
    return {f"p{p}": ordered[max(0, -(-p * len(ordered) // 100) - 1)] if ordered else None for p in (50, 95)}


def period(days: int | None, since: str | None, until: str | None, today: date | None = None) -> tuple[date, date]:
    """The period asked for: the last `days` days up to today, or [since, until), until defaulting to tomorrow."""
    today = today or date.today()
    try:
        end = date.fromisoformat(until) if until else today + timedelta(days=1)
        start = date.fromisoformat(since) if since else end - timedelta(days=days or 1)
    except ValueError as error:
        raise HistoryError(f"{error}: give dates as YYYY-MM-DD, for example --since 2026-11-01.") from None
    if start >= end:
        raise HistoryError(f"The period from {start} to {end} (excluded) holds no day: --since must come before "
                           "--until.")
    return start, end


def write_csv(figures: Usage, out) -> None:
    writer = csv.writer(out)
    writer.writerow(DAY_COLUMNS)
    for day, tally in figures.days.items():
        writer.writerow([day, *asdict(tally).values()])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m history.usage", description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=7, help="the last DAYS days, today included (default 7)")
    parser.add_argument("--since", help="from this day on (YYYY-MM-DD), instead of --days")
    parser.add_argument("--until", help="up to this day, excluded (YYYY-MM-DD; default: up to today included)")
    parser.add_argument("--csv", action="store_true", help="the days as CSV instead of everything as JSON")
    arguments = parser.parse_args(argv)
    try:
        database = configured_database()
        figures = usage(database, *period(arguments.days, arguments.since, arguments.until))
    except (ChatError, sqlite3.Error) as error:
        return cannot("count the usage", error)
    if arguments.csv:
        write_csv(figures, sys.stdout)
    else:
        print(json.dumps(asdict(figures), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
