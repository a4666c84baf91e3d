"""Which documents and passages the replies drew on, most first, and the documents no reply drew on.

A reply names each passage it drew on (`ui.sources` stores them in its metadata as "document · section"); counted over
a period, they say which documents earn their place, and the ones never named which may be missing the words
visitors use, or hold nothing they ask about.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass

from history.conversation import REPLY, SOURCES

SOURCES_OF_REPLIES = f'''
    SELECT json_extract(s."metadata", '$.{REPLY}.{SOURCES}') AS sources,
           (SELECT q."output" FROM steps q WHERE q."threadId" = s."threadId" AND q."type" = 'user_message'
              AND q."createdAt" <= s."createdAt" ORDER BY q."createdAt" DESC LIMIT 1) AS question
    FROM steps s
    WHERE s."createdAt" >= :start AND s."createdAt" < :end AND s."type" = 'assistant_message' AND sources IS NOT NULL'''


MOST_QUESTIONS = 5  # listed for each document


@dataclass
class DocumentUse:
    documents: dict[str, int]  # a document's file name without extension: the replies that drew on it, most first
    passages: dict[str, int]  # "document · section": the replies that drew on it, most first
    never: list[str]  # the knowledge base's documents no reply of the period drew on
    questions: dict[str, list[tuple[str, int]]]  # a document: the questions whose replies drew on it most, most first


def sources_on(connection: sqlite3.Connection, bounds: dict[str, str]
               ) -> tuple[Counter[str], Counter[str], Counter[tuple[str, str]]]:
    """The documents and the passages the replies within `bounds` (a day's start and end as stored times) drew on:
    how many replies each; and how many replies to each question drew on each document."""
    documents: Counter[str] = Counter()
    passages: Counter[str] = Counter()
    questions: Counter[tuple[str, str]] = Counter()
    for row in connection.execute(SOURCES_OF_REPLIES, bounds):
        labels = {passage["label"] for passage in json.loads(row["sources"])}
        passages.update(labels)
        names = {label.split(" · ")[0] for label in labels}
        documents.update(names)
        questions.update((name, " ".join((row["question"] or "").split())) for name in names)
    return documents, passages, questions


def document_use(documents: Counter[str], passages: Counter[str], questions: Counter[tuple[str, str]],
                 known: dict[str, tuple[str, float]]) -> DocumentUse:
    """From the period's counts; `known`: the documents the knowledge base holds now (`KnowledgeIndex.documents`)."""
    found: dict[str, list[tuple[str, int]]] = {}
    for (name, question), count in questions.most_common():
        if question and len(found.setdefault(name, [])) < MOST_QUESTIONS:
            found[name].append((question, count))
    return DocumentUse(dict(documents.most_common()), dict(passages.most_common()),
                       sorted(name for name in known if name not in documents), found)
