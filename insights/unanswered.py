"""The questions the guide could not answer, grouped, most asked first: the documents to add next.

A question counts when its reply (with the knowledge base on) drew on no passage, or said that the documents do not
cover it, or got a thumbs down. Questions asked in other words count once: they are grouped by the search terms the
knowledge base searches with (`retrieval.terms`, with English words' Chinese from its glossary), each term weighted
by how rare it is among the period's questions, without the words that only frame a question (now, today, how long,
how much). Two wordings are one question when they share enough of that weight and at least one term that is not a
name of the guide's documents: "广州塔今天排队的人多吗" and "现在去广州塔要排队多久" meet on 广州塔 and 排队, while
"广州塔今天开门吗" shares only the sight's name with them, and is another question. A group is marked answered when the knowledge base, searched again now, puts first a
passage of a document changed after the group was last asked (a document added for it).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from history.conversation import APPENDED, REPLY, SOURCES
from history.records import connect
from insights.usage import stored_time, utc_bound
from retrieval.grounding import says_not_covered
from retrieval.index import Found
from retrieval.terms import terms, translated

SAME_QUESTION = 0.4  # weighted share of terms two wordings of one question have in common, at least
FRAME = frozenset("现在 今天 明天 今晚 多久 多长 多长时间 长时间 时间 大概 大约 多不多 不多 人 等 几点 多少钱 钱 需要 一般 附近 "
                  "now today tonight long much time usually near".split())
COLUMNS = ("asked", "question", "reasons", "wordings", "last_asked", "persona", "answered_by")
REASONS = {"no_source": "资料中未见 no source", "not_covered": "回答说资料未涉及 said not covered",
           "thumbs_down": "差评 thumbs down"}
# Each reply that counts, with the question before it in its thread.
REPLIES = f'''
    SELECT s."output" AS reply, s."createdAt" AS at, f."value" AS feedback,
           json_extract(t."metadata", '$.chat_profile') AS persona,
           json_extract(s."metadata", '$.{REPLY}.{APPENDED}') IS NOT NULL AS checked,
           json_extract(s."metadata", '$.{REPLY}.{SOURCES}') IS NOT NULL AS sourced,
           (SELECT q."output" FROM steps q WHERE q."threadId" = s."threadId" AND q."type" = 'user_message'
              AND q."createdAt" <= s."createdAt" ORDER BY q."createdAt" DESC LIMIT 1) AS question
    FROM steps s JOIN threads t ON t."id" = s."threadId" LEFT JOIN feedbacks f ON f."forId" = s."id"
    WHERE s."createdAt" >= :start AND s."createdAt" < :end AND s."type" = 'assistant_message'
      AND ((checked AND NOT sourced) OR f."value" = 0)'''


@dataclass
class Unanswered:
    """One question, however many wordings it was asked in."""

    question: str  # the wording asked most (the latest of those)
    asked: int
    last_asked: str  # UTC, ISO 8601
    persona: str
    reasons: dict[str, int]  # how many times each reason applied
    wordings: list[str] = field(default_factory=list)  # every distinct wording, most asked first
    answered_by: str = ""  # the document that now answers it, once one does

    def row(self) -> list:
        return [self.asked, self.question, "; ".join(f"{reason} {count}" for reason, count in self.reasons.items()),
                " | ".join(self.wordings), self.last_asked, self.persona, self.answered_by]


@dataclass
class _Asked:
    question: str
    at: str
    persona: str
    reason: str
    terms: set[str]


def unanswered(database: Path, since: date, until: date, documents: dict[str, tuple[str, float]],
               default_persona: str = "-") -> list[Unanswered]:
    """The period's unanswered questions, grouped, most asked first (then the latest first). `documents`: the
    knowledge base's (`KnowledgeIndex.documents`), whose names tell what a question is about; a chat that named no
    persona had `default_persona`."""
    with connect(database) as connection:
        rows = connection.execute(REPLIES, {"start": utc_bound(since), "end": utc_bound(until)}).fetchall()
    connection.close()
    asked = [_Asked(row["question"].strip(), row["at"], row["persona"] or default_persona, reason(row), search_terms(row["question"]))
             for row in rows if row["question"] and row["question"].strip()]
    latest = max((question.at for question in asked), default="")
    return sorted((_summary(group) for group in grouped(asked, name_terms(documents, latest))), key=lambda group: (group.asked, group.last_asked),
                  reverse=True)


def reason(row) -> str:
    if row["feedback"] == 0:
        return "thumbs_down"
    return "not_covered" if says_not_covered(row["reply"] or "") else "no_source"


def search_terms(question: str) -> set[str]:
    return (set(terms(question)) | set(translated(question))) - FRAME


def name_terms(documents: dict[str, tuple[str, float]], before: str) -> set[str]:
    """The search terms of the names and titles of the documents the guide held `before` then (a stored time): a
    document added since, to answer a question, must not change how the questions asked before it are grouped."""
    return {term for name, (title, changed) in documents.items()
            if stored_time(datetime.fromtimestamp(changed, UTC)) < before for term in search_terms(f"{name} {title}")}


def grouped(asked: list[_Asked], names: set[str]) -> list[list[_Asked]]:
    """Wordings of one question together: each new wording joins the group of the first earlier one it is similar
    to (a term's weight: the log of how rare it is among these questions); a wording asked again, its group."""
    counts = Counter(term for question in asked for term in question.terms)
    weight = {term: math.log(1 + len(asked) / count) for term, count in counts.items()}
    groups: list[list[_Asked]] = []
    wordings: list[list[set[str]]] = []  # each group's distinct wordings' terms
    group_of: dict[str, int] = {}  # a wording's text: its group
    holding: dict[str, set[int]] = {}  # a term other than a name: the groups holding a wording with it
    for question in sorted(asked, key=lambda question: question.at):
        number = group_of.get(wording := _normal(question.question))
        if number is None:
            candidates = set().union(*(holding.get(term, set()) for term in question.terms - names))
            number = next((candidate for candidate in sorted(candidates)
                           if any(_similar(question.terms, other, weight, names) for other in wordings[candidate])),
                          None)
            if number is None:
                number = len(groups)
                groups.append([])
                wordings.append([])
            wordings[number].append(question.terms)
            group_of[wording] = number
            for term in question.terms - names:
                holding.setdefault(term, set()).add(number)
        groups[number].append(question)
    return groups


def _similar(one: set[str], other: set[str], weight: dict[str, float], names: set[str]) -> bool:
    shared = one & other
    return bool(shared - names) and sum(map(weight.get, shared)) >= SAME_QUESTION * sum(map(weight.get, one | other))


def _normal(question: str) -> str:
    return re.sub(r"[\W_]+", "", question.lower())


def _summary(group: list[_Asked]) -> Unanswered:
    wordings = Counter(question.question for question in group)
    latest = {question.question: question.at for question in group}
    ordered = sorted(wordings, key=lambda wording: (wordings[wording], latest[wording]), reverse=True)
    persona = Counter(question.persona for question in group).most_common(1)[0][0]
    return Unanswered(ordered[0], len(group), max(latest.values()), persona,
                      dict(Counter(question.reason for question in group).most_common()), ordered)


def mark_answered(groups: list[Unanswered], search: Callable[[str, str], list[Found]]) -> None:
    """Mark each group that a document changed since it was last asked now answers (`search(question, persona)`:
    the knowledge base's best passages, best first)."""
    for group in groups:
        for found in search(group.question, group.persona)[:1]:
            try:
                changed = Path(found.path).stat().st_mtime
            except OSError:
                continue
            if stored_time(datetime.fromtimestamp(changed, UTC)) > group.last_asked:
                group.answered_by = found.name
