"""Everything the operator's page shows for a period, built once from the stored history and the knowledge base, and
the same as CSV and JSON for downloads and scripts (`python -m insights`, `/operator/*.csv`)."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import date

from insights.days import Days
from insights.documents import DocumentUse, document_use
from insights.unanswered import COLUMNS, Unanswered, mark_answered, unanswered
from insights.usage import DAY_COLUMNS, Usage, combined
from retrieval.index import Found
from retrieval.knowledge_base import KnowledgeBase

KINDS = ("usage", "unanswered", "documents", "users")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")  # a cell starting so is run as a formula by spreadsheets
USER_COLUMNS = ("user", "chats", "questions", "tokens_in", "tokens_out", "stopped", "thumbs_up", "thumbs_down")


@dataclass
class Report:
    usage: Usage
    unanswered: list[Unanswered]
    documents: DocumentUse


class Insights:
    """The operator's figures of any period, from the history's days (`insights.days`) and the knowledge base as it is
    now; the searches that tell whether a new document answers a question are kept until a document changes."""

    def __init__(self, days: Days, knowledge: KnowledgeBase) -> None:
        self.days, self.knowledge = days, knowledge
        self._documents: dict[str, tuple[str, float]] = {}  # the documents the searches below were made in
        self._found: dict[tuple[str, str], list[Found]] = {}  # (question, persona): the best passage

    def report(self, since: date, until: date) -> Report:
        """Unanswered questions are searched again in the folders of the persona they were asked."""
        days = self.days.days(since, until)
        documents = self.knowledge.index.documents(self.knowledge.all_folders())
        groups = unanswered([asked for day in days.values() for asked in day.asked], documents)
        if documents != self._documents:
            self._documents, self._found = documents, {}
        mark_answered(groups, self._search)
        return Report(combined({day: figures.usage for day, figures in days.items()}), groups, document_use(
            sum((day.documents for day in days.values()), Counter()),
            sum((day.passages for day in days.values()), Counter()),
            sum((day.questions for day in days.values()), Counter()), documents))

    def _search(self, question: str, persona: str) -> list[Found]:
        if (question, persona) not in self._found:
            self._found[question, persona] = self.knowledge.index.search(question, self.knowledge.folders(persona), 1)
        return self._found[question, persona]


def as_json(figures: Report, kind: str) -> str:
    part = {"usage": asdict(figures.usage), "unanswered": [asdict(group) for group in figures.unanswered],
            "documents": asdict(figures.documents), "users": asdict(figures.usage)["users"]}[kind]
    return json.dumps(part, ensure_ascii=False, indent=1)


def as_csv(figures: Report, kind: str) -> str:
    """One table per kind: the days, the unanswered questions, the documents by use (never used: 0), the users."""
    out = io.StringIO()
    writer = SpreadsheetSafe(csv.writer(out))
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


class SpreadsheetSafe:
    """A CSV writer whose text cells cannot run as formulas when an operator opens the file in a spreadsheet: a
    visitor's question "=HYPERLINK(…)" is written as "'=HYPERLINK(…)" (OWASP's advice on CSV injection)."""

    def __init__(self, writer) -> None:
        self.writer = writer

    def writerow(self, row) -> None:
        self.writer.writerow(f"'{cell}" if isinstance(cell, str) and cell.startswith(_FORMULA) else cell
                             for cell in row)

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)
