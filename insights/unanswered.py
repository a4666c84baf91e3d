"""The questions the guide could not answer, grouped, most asked first: the documents to add next.

A question counts when its reply (with the knowledge base on) drew on no passage, or said that the documents do not
cover it, or got a thumbs down. Questions asked in other words count once: they are grouped by the search terms the
knowledge base searches with (`retrieval.terms`, with English words' Chinese from its glossary), each term weighted
by how rare it is among the period's questions, without the words that only frame a question (now, today, how long,
how much, may I). Two wordings are one question when they share enough of that weight and at least one term that is
not a name of the guide's documents, and do not name two different places: "广州塔今天排队的人多吗" and
"现在去广州塔要排队多久" meet on 广州塔 and 排队, while "广州塔今天开门吗" shares only the sight's name with them and
"陈家祠排队要多久" asks about another place. A group is marked answered when the knowledge base, searched again now,
puts first a passage that speaks of what the group asked about, of a document changed after it was last asked.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from history.conversation import APPENDED, REPLY, SOURCES
from retrieval.grounding import says_not_covered
from retrieval.index import Found
from retrieval.terms import GLOSSARY, terms, translated

EPOCH = datetime.fromtimestamp(0, UTC)
SAME_QUESTION = 0.4  # weighted share of terms two wordings of one question have in common, at least
FRAME = frozenset("问 想问 问一下 第 不能 能不能 可不可以 带 现在 今天 明天 今晚 多久 多长 多长时间 长时间 时间 大概 大约 多不多 不多 人 等 几点 多少钱 钱 需要 一般 附近 "
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
    about: list[str] = field(default_factory=list)  # its search terms other than the documents' names
    answered_by: str = ""  # the document that now answers it, once one does

    def row(self) -> list:
        return [self.asked, self.question, "; ".join(f"{reason} {count}" for reason, count in self.reasons.items()),
                " | ".join(self.wordings), self.last_asked, self.persona, self.answered_by]


@dataclass
class Asked:
    """One asking of a question the guide could not answer."""

    question: str
    at: str
    persona: str
    reason: str
    terms: frozenset[str]


def asked_on(connection: sqlite3.Connection, bounds: dict[str, str], default_persona: str) -> list[Asked]:
    """The unanswered questions asked within `bounds` (a day's start and end as stored times); a chat that named no
    persona had `default_persona`."""
    return [Asked(row["question"].strip(), row["at"], row["persona"] or default_persona, reason(row),
                  search_terms(row["question"]))
            for row in connection.execute(REPLIES, bounds) if row["question"] and row["question"].strip()]


def unanswered(asked: list[Asked], documents: dict[str, tuple[str, float]]) -> list[Unanswered]:
    """A period's unanswered questions, grouped, most asked first (then the latest first). `documents`: the
    knowledge base's (`KnowledgeIndex.documents`), whose names tell what a question is about."""
    dated = [(datetime.fromtimestamp(changed, UTC), search_terms(f"{name} {title}"))
             for name, (title, changed) in documents.items()]
    names = name_terms(dated, max((moment(question.at) for question in asked), default=EPOCH))
    return sorted((_summary(group, name_terms(dated, max(moment(question.at) for question in group)))
                   for group in grouped(asked, names)), key=lambda group: (group.asked, group.last_asked), reverse=True)


def reason(row) -> str:
    if row["feedback"] == 0:
        return "thumbs_down"
    return "not_covered" if says_not_covered(row["reply"] or "") else "no_source"


@functools.lru_cache(maxsize=1 << 16)
def search_terms(question: str) -> frozenset[str]:
    """The terms a question is grouped by: its English words that the glossary knows stand in Chinese, so that
    "How long is the queue?" meets "排队要多久"."""
    return frozenset((set(terms(question)) - GLOSSARY.keys() | set(translated(question))) - FRAME)


def moment(stored: str) -> datetime:
    """A time as Chainlit stores it (UTC, ISO 8601, to the microsecond), to compare with a file's: an answer can be
    written within the second its question was asked."""
    return datetime.fromisoformat(stored)


def name_terms(dated: list[tuple[datetime, frozenset[str]]], before: datetime) -> set[str]:
    """The search terms of the names and titles of the documents (`dated`: each one's time changed and its terms)
    the guide held `before` then: a document added since, to answer a question (an entry
    written from the operator's page is named by the question), must not change how the questions asked before it
    are grouped, nor what each is about."""
    return {term for changed, terms_of_name in dated if changed < before for term in terms_of_name}


def grouped(asked: list[Asked], names: set[str]) -> list[list[Asked]]:
    """Wordings of one question together: each new wording joins the group of the first earlier wording it is similar
    to (a term's weight: the log of how rare it is among these questions); a wording asked again, its group.

    Only wordings that share a term among the rarest of both are compared: a wording's prefix holds its rarest terms
    until the rest weigh less than `SAME_QUESTION` of it, and two similar wordings always share a prefix term (prefix
    filtering, Chaudhuri et al. 2006), so a year of questions groups in a fraction of a second."""
    counts = Counter(term for question in asked for term in question.terms)
    weight = {term: math.log(1 + len(asked) / count) for term, count in counts.items()}
    groups: list[list[Asked]] = []
    wordings: list[tuple[set[str], int]] = []  # each distinct wording's terms, and its group
    group_of: dict[str, int] = {}  # a wording's text: its group
    prefixed: dict[str, list[int]] = {}  # a term: the wordings with it in their prefix
    for question in sorted(asked, key=lambda question: question.at):
        number = group_of.get(wording := _normal(question.question))
        if number is None:
            prefix = _prefix(question.terms, weight)
            candidates = {other for term in prefix for other in prefixed.get(term, ())}
            number = min((wordings[other][1] for other in candidates
                          if _similar(question.terms, wordings[other][0], weight, names)), default=len(groups))
            if number == len(groups):
                groups.append([])
            for term in prefix:
                prefixed.setdefault(term, []).append(len(wordings))
            wordings.append((question.terms, number))
            group_of[wording] = number
        groups[number].append(question)
    return groups


def _prefix(terms: set[str], weight: dict[str, float]) -> list[str]:
    """The rarest terms, until those left weigh less than the share two similar wordings have in common."""
    rest = sum(map(weight.get, terms))
    least = SAME_QUESTION * rest * (1 - 1e-9)  # a hair longer than needed, against rounding
    prefix = []
    for term in sorted(terms, key=lambda term: (-weight[term], term)):
        if rest < least:
            break
        prefix.append(term)
        rest -= weight[term]
    return prefix


def _similar(one: set[str], other: set[str], weight: dict[str, float], names: set[str]) -> bool:
    """Enough weight in common, a term in common that is not a name, and no two different places."""
    shared = one & other
    if not shared - names or (one & names and other & names and not shared & names):
        return False
    return sum(map(weight.get, shared)) >= SAME_QUESTION * sum(map(weight.get, one | other))


def _normal(question: str) -> str:
    return re.sub(r"[\W_]+", "", question.lower())


def _summary(group: list[Asked], names: set[str]) -> Unanswered:
    wordings = Counter(question.question for question in group)
    latest = {question.question: question.at for question in group}
    ordered = sorted(wordings, key=lambda wording: (wordings[wording], latest[wording]), reverse=True)
    persona = Counter(question.persona for question in group).most_common(1)[0][0]
    return Unanswered(ordered[0], len(group), max(latest.values()), persona,
                      dict(Counter(question.reason for question in group).most_common()), ordered,
                      sorted(search_terms(ordered[0]) - names))


def mark_answered(groups: list[Unanswered], search: Callable[[str, str], list[Found]]) -> None:
    """Mark each group answered whose best passage now (`search(question, persona)`: the knowledge base's best
    passages, best first) is of a document changed since it was last asked, and speaks of what it is about: a sight's
    document edited for something else answers none of the questions about that sight."""
    for group in groups:
        for found in search(group.question, group.persona)[:1]:
            try:
                changed = Path(found.path).stat().st_mtime
            except OSError:
                continue
            if (datetime.fromtimestamp(changed, UTC) > moment(group.last_asked)
                    and set(group.about) & search_terms(f"{found.title} {found.section} {found.whole or found.text}")):
                group.answered_by = found.name
