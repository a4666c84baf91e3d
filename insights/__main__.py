"""`python -m insights usage|unanswered|documents|users`: the operator's figures for scripts, as JSON or CSV.

The same figures as the operator's page (`/operator`), for a period of local days: `--days 7` (the default, today
included), or `--since 2026-11-01 --until 2026-12-01` (the end excluded). Read from the SQLite history and the
knowledge index the app keeps, so also while it runs.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys

from config.errors import ChatError, cannot
from history.records import configured_database
from insights.days import Days
from insights.report import KINDS, Insights, as_csv, as_json
from insights.usage import period
from retrieval.knowledge_base import KnowledgeBase


def main(argv: list[str] | None = None) -> int:
    from config.personas import load_personas
    from config.settings import load_settings

    parser = argparse.ArgumentParser(prog="python -m insights", description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS, help="usage: per day, hour, persona, model and user; unanswered: the "
                        "questions the guide could not answer; documents: by use; users: per user")
    parser.add_argument("--days", type=int, default=7, help="the last DAYS days, today included (default 7)")
    parser.add_argument("--since", help="from this day on (YYYY-MM-DD), instead of --days")
    parser.add_argument("--until", help="up to this day, excluded (YYYY-MM-DD; default: up to today included)")
    parser.add_argument("--csv", action="store_true", help="CSV instead of JSON")
    arguments = parser.parse_args(argv)
    try:
        database = configured_database()
        settings = load_settings()
        personas = load_personas(settings.prompts_dir, settings.persona)
        knowledge = KnowledgeBase(settings.knowledge_index, settings.knowledge_folder,
                                  {persona.name: persona.knowledge for persona in personas})
        figures = Insights(Days(database, settings.persona), knowledge).report(
            *period(arguments.days, arguments.since, arguments.until))
    except (ChatError, sqlite3.Error) as error:
        return cannot(f"report {arguments.kind}", error)
    print((as_csv if arguments.csv else as_json)(figures, arguments.kind), end="" if arguments.csv else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
