"""Everything the operator's page shows for a period, built once from the stored history and the knowledge base, and
the same as CSV and JSON for downloads and scripts (`python -m insights`, `/operator/*.csv`)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from insights.documents import DocumentUse, document_use
from insights.unanswered import COLUMNS, Unanswered, mark_answered, unanswered
from insights.usage import DAY_COLUMNS, Usage, usage
from retrieval.knowledge_base import KnowledgeBase

KINDS = ("usage", "unanswered", "documents", "users")
USER_COLUMNS = ("user", "chats", "questions", "tokens_in", "tokens_out", "stopped", "thumbs_up", "thumbs_down")


@dataclass
class Report:
    usage: Usage
    unanswered: list[Unanswered]
    documents: DocumentUse


def report(database: Path, since: date, until: date, knowledge: KnowledgeBase, default_persona: str) -> Report:
    """The period's figures; unanswered questions searched again in the knowledge base as it is now, in the folders
    of the persona they were asked (`default_persona` where the chat named none)."""
    documents = knowledge.index.documents(knowledge.all_folders())
    groups = unanswered(database, since, until, documents, default_persona)
    mark_answered(groups, lambda question, persona: knowledge.index.search(question, knowledge.folders(persona), 1))
    return Report(usage(database, since, until, default_persona), groups, document_use(database, since, until, documents))


def as_json(figures: Report, kind: str) -> str:
    part = {"usage": asdict(figures.usage), "unanswered": [asdict(group) for group in figures.unanswered],
            "documents": asdict(figures.documents), "users": asdict(figures.usage)["users"]}[kind]
    return json.dumps(part, ensure_ascii=False, indent=1)


def as_csv(figures: Report, kind: str) -> str:
    """One table per kind: the days, the unanswered questions, the documents by use (never used: 0), the users."""
    out = io.StringIO()
    writer = csv.writer(out)
    if kind == "usage":
        writer.writerow(DAY_COLUMNS)
        writer.writerows([day, *asdict(tally).values()] for day, tally in figures.usage.days.items())
    elif kind == "unanswered":
        writer.writerow(COLUMNS)
        writer.writerows(group.row() for group in figures.unanswered)
    elif kind == "documents":
        writer.writerow(("document", "replies"))
        writer.writerows([*figures.documents.documents.items(), *((name, 0) for name in figures.documents.never)])
    else:
        writer.writerow(USER_COLUMNS)
        writer.writerows([name, tally.chats, tally.questions, tally.tokens_in, tally.tokens_out, tally.stopped,
                          tally.thumbs_up, tally.thumbs_down] for name, tally in figures.usage.users.items())
    return out.getvalue()
