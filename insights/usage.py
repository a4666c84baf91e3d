"""What visitors asked and how the replies went, counted from the stored conversations.

For a period of local days, added up from each day's figures (`insights.days` reads and keeps them): questions per
day and per hour, chats, logged-in users (visitors without logins are not told apart), replies stopped, thumbs up and
down, tokens in and out, first-token and reply times (p50, p95), and the same counts per persona, per model and, with
logins, per user. A reply counts from the figures stored with it (`chat.stream`), so replies stored by an
earlier version count as questions and chats only. Also a user's tokens of today, for the daily limit
(`CHAT_DAILY_TOKENS_PER_USER`). Standard library only (sqlite3), read-only, also while the app runs.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from config.errors import HistoryError
from history.conversation import REPLY
from history.records import connect

MAX_DAYS = 3660  # ten years: a period's days are each a row
DAY_COLUMNS = ("day", "questions", "chats", "users", "stopped", "thumbs_up", "thumbs_down", "tokens_in", "tokens_out")
FIGURE = f"""json_extract(s."metadata", '$.{REPLY}.%s')"""
# The questions and replies of a day (its bounds in UTC, as Chainlit stores times), with their local hour.
STEPS = f'''
    SELECT s."type", s."threadId", t."userIdentifier" AS user, json_extract(t."metadata", '$.chat_profile') AS persona,
           CAST(strftime('%H', s."createdAt", 'localtime') AS INT) AS hour,
           {FIGURE % "prompt_tokens"} AS tokens_in, {FIGURE % "generated_tokens"} AS tokens_out,
           {FIGURE % "ttft_s"} AS first_token_s, {FIGURE % "reply_s"} AS reply_s, {FIGURE % "finish"} AS finish,
           {FIGURE % "model"} AS model, f."value" AS feedback
    FROM steps s JOIN threads t ON t."id" = s."threadId" LEFT JOIN feedbacks f ON f."forId" = s."id"
    WHERE s."createdAt" >= :start AND s."createdAt" < :end
      AND (s."type" = 'user_message' OR json_extract(s."metadata", '$.{REPLY}') IS NOT NULL)'''
TOKENS_OF_USER = f'''
    SELECT COALESCE(SUM({FIGURE % "prompt_tokens"} + {FIGURE % "generated_tokens"}), 0)
    FROM threads t JOIN steps s ON s."threadId" = t."id"
    WHERE t."userIdentifier" = :user AND s."createdAt" >= :start AND s."type" = 'assistant_message\''''


@dataclass
class Tally:
    """The counts of one day, one persona, model or user, or the whole period."""

    questions: int = 0
    chats: int = 0  # these two count distinct ones, so they do not add up over days
    users: int = 0
    stopped: int = 0
    thumbs_up: int = 0
    thumbs_down: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def add(self, other: Tally) -> None:
        """Add the counts that add up (all but chats and users)."""
        self.questions += other.questions
        self.stopped += other.stopped
        self.thumbs_up += other.thumbs_up
        self.thumbs_down += other.thumbs_down
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out


@dataclass
class DayUsage:
    """A day's figures in the form that adds up over days: tallies by key ("" the day, then "persona:NAME",
    "model:NAME", "user:NAME"), the chats and users seen by key, questions per hour, and the times of its replies."""

    tallies: dict[str, Tally]
    chats: dict[str, set[str]]
    users: dict[str, set[str]]
    hours: list[int]
    first_tokens: list[float]
    replies: list[float]

    @classmethod
    def empty(cls) -> DayUsage:
        return cls({}, {}, {}, [0] * 24, [], [])

    def day_tally(self) -> Tally:
        day = Tally()
        day.add(self.tallies.get("", day))
        day.chats, day.users = len(self.chats.get("", ())), len(self.users.get("", ()))
        return day


@dataclass
class Usage:
    since: str
    until: str  # excluded
    total: Tally
    days: dict[str, Tally]  # every day of the period, also those without a question
    hours: list[int]  # questions per hour of the day, 0 to 23
    personas: dict[str, Tally]
    models: dict[str, Tally]  # the questions each model answered
    users: dict[str, Tally]  # logged-in users only
    first_token_s: dict[str, float | None] = field(default_factory=dict)  # p50, p95
    reply_s: dict[str, float | None] = field(default_factory=dict)


def stored_time(moment: datetime) -> str:
    """A moment as Chainlit stores times (UTC, ISO 8601), so that stored times compare with it as text."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def utc_bound(day: date) -> str:
    """The start of a local day as Chainlit stores times, so the index on steps' times serves."""
    return stored_time(datetime.combine(day, time.min))


def day_usage(connection: sqlite3.Connection, bounds: dict[str, str], default_persona: str) -> DayUsage:
    """The figures of the day within `bounds` (its start and end as stored times); a chat that named no persona had
    `default_persona`."""
    tallies: dict[str, Tally] = {}
    chats: dict[str, set[str]] = {}
    users: dict[str, set[str]] = {}
    hours, first_tokens, replies = [0] * 24, [], []
    for row in connection.execute(STEPS, bounds):
        keys = [""] + [f"{kind}:{value}" for kind, value in (("persona", row["persona"] or default_persona),
                                                               ("model", row["model"]), ("user", row["user"])) if value]
        for key in keys:
            tally = tallies.setdefault(key, Tally())
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
                tally.questions += key.startswith("model:")  # a question has a model once it is answered
        if row["type"] == "user_message":
            hours[row["hour"]] += 1
        else:
            first_tokens += [row["first_token_s"]] if row["first_token_s"] is not None else []
            replies += [row["reply_s"]] if row["reply_s"] is not None else []
    return DayUsage(tallies, chats, users, hours, first_tokens, replies)


def combined(days: dict[date, DayUsage]) -> Usage:
    """The figures of a period from those of its days, in order (every day of it, also those without a question)."""
    tallies: dict[str, Tally] = {}
    chats: dict[str, set[str]] = {}
    users: dict[str, set[str]] = {}
    hours, first_tokens, replies = [0] * 24, [], []
    for day in days.values():
        for key, tally in day.tallies.items():
            tallies.setdefault(key, Tally()).add(tally)
            chats.setdefault(key, set()).update(day.chats[key])
            users.setdefault(key, set()).update(day.users.get(key, ()))
        hours = [sum(pair) for pair in zip(hours, day.hours)]
        first_tokens += day.first_tokens
        replies += day.replies
    for key, tally in tallies.items():
        tally.chats, tally.users = len(chats[key]), len(users.get(key, ()))
    groups: dict[str, dict[str, Tally]] = {"persona": {}, "model": {}, "user": {}}
    for key, tally in tallies.items():
        if key:
            kind, _, name = key.partition(":")
            groups[kind][name] = tally
    return Usage(str(min(days)), str(max(days) + timedelta(days=1)), tallies.get("", Tally()),
                 {str(day): figures.day_tally() for day, figures in days.items()}, hours, groups["persona"],
                 groups["model"], groups["user"], percentiles(first_tokens), percentiles(replies))


def tokens_today(database: Path, user: str, today: date | None = None) -> int:
    """The tokens in and out of `user`'s replies since the start of today (local time)."""
    with connect(database) as connection:
        spent = connection.execute(TOKENS_OF_USER, {"user": user, "start": utc_bound(today or date.today())})
        count = spent.fetchone()[0]
    connection.close()
    return int(count)


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
    except (ValueError, OverflowError) as error:
        raise HistoryError(f"{error}: give dates as YYYY-MM-DD, for example --since 2026-11-01.") from None
    if (end - start).days > MAX_DAYS:
        raise HistoryError(f"The period from {start} to {end} is longer than {MAX_DAYS} days: choose a shorter one.")
    if start >= end:
        raise HistoryError(f"The period from {start} to {end} (excluded) holds no day: --since must come before "
                           "--until.")
    return start, end

