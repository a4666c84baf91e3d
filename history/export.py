"""`python -m history.export`: the stored conversations as Markdown and as JSON, for the operator.

One conversation (`--thread ID`), a user's (`--user NAME`) or all, optionally only those last active in a
date range (`--since 2026-11-01 --until 2026-12-01`, the end excluded). Writes `OUT.md` and `OUT.json`
(`--out`, default `conversations-<date>` here), UTF-8 with Chinese as it is; in the Markdown each message is a quote
whose text shows exactly as written (no Markdown or HTML of its own). Reads the database named by
`CHAT_DB` (or `chat.db` in `CHAT_STATE_DIR`), also while the app runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from dataclasses import asdict
from pathlib import Path

from config.errors import ChatError, cannot
from history.records import Record, configured_database, read_records

ROLES = {"user": "用户 User", "assistant": "助手 Assistant"}


def to_markdown(records: list[Record]) -> str:
    """Every field that a visitor or a socket could set (the thread's name is its first question, the persona comes
    from the socket) is written as text: one line each (`field`), a message as a quote (`quoted`)."""
    parts = []
    for record in records:
        parts.append(f"## {field(record.name or record.id)}\n\n"
                     f"- id: {field(record.id)}\n- user: {field(record.user or '(no login)')}\n"
                     f"- persona: {field(record.persona or '-')}\n- started: {field(record.created or '-')}\n"
                     f"- last activity: {field(record.last_activity or '-')}\n")
        for message in record.messages:
            parts.append(f"**{ROLES[message['role']]}** · {field(message['created'])}\n\n{quoted(message['content'])}\n")
    return "# Conversations\n\n" + "\n".join(parts)


def field(text: str) -> str:
    """A field on one line whose every character shows as written: its line breaks as spaces, Markdown's punctuation
    escaped."""
    return _escaped(" ".join(str(text).split()))


def quoted(text: str) -> str:
    """A message as a quote whose every character shows as written: Markdown's punctuation escaped, so a visitor's
    question can neither start a turn of its own ("**助手 Assistant**") nor put HTML in the operator's viewer."""
    return "\n".join(f"> {line}  " if line.strip() else ">" for line in _escaped(text).splitlines() or [""])


def _escaped(text: str) -> str:
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m history.export", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--thread", help="one conversation, by its id")
    which.add_argument("--user", help="every conversation of this user")
    parser.add_argument("--since", help="last active on or after this date (YYYY-MM-DD)")
    parser.add_argument("--until", help="last active before this date (YYYY-MM-DD)")
    parser.add_argument("--out", default=f"conversations-{time.strftime('%Y-%m-%d')}",
                        help="path without extension: OUT.md and OUT.json are written")
    arguments = parser.parse_args(argv)
    try:
        database = configured_database()
        records = read_records(database, arguments.thread, arguments.user, arguments.since, arguments.until)
    except (ChatError, sqlite3.Error) as error:
        return cannot("export", error)
    markdown, document = Path(f"{arguments.out}.md"), Path(f"{arguments.out}.json")
    markdown.write_text(to_markdown(records), encoding="utf-8")
    document.write_text(json.dumps([asdict(record) for record in records], ensure_ascii=False,
                                                   indent=1), encoding="utf-8")
    count = sum(len(record.messages) for record in records)
    print(f"Exported {len(records)} conversations ({count} messages) to {markdown} and {document}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
