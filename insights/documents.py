"""Which documents and passages the replies drew on, most first, and the documents no reply drew on.

A reply names each passage it drew on (`ui.sources` stores them in its metadata as "document · section"); counted over
a period, they say which documents earn their place, and the ones never named which may be missing the words
visitors use, or hold nothing they ask about.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from history.conversation import REPLY, SOURCES
from history.records import connect
from insights.usage import utc_bound

SOURCES_OF_REPLIES = f'''
    SELECT json_extract(s."metadata", '$.{REPLY}.{SOURCES}') AS sources FROM steps s
    WHERE s."createdAt" >= :start AND s."createdAt" < :end AND s."type" = 'assistant_message' AND sources IS NOT NULL'''


@dataclass
class DocumentUse:
    documents: dict[str, int]  # a document's file name without extension: the replies that drew on it, most first
    passages: dict[str, int]  # "document · section": the replies that drew on it, most first
    never: list[str]  # the knowledge base's documents no reply of the period drew on


def document_use(database: Path, since: date, until: date, known: dict[str, tuple[str, float]]) -> DocumentUse:
    """`known`: the documents the knowledge base holds now (`KnowledgeIndex.documents`)."""
    with connect(database) as connection:
        rows = connection.execute(SOURCES_OF_REPLIES, {"start": utc_bound(since), "end": utc_bound(until)}).fetchall()
    connection.close()
    documents, passages = Counter(), Counter()
    for row in rows:
        labels = {passage["label"] for passage in json.loads(row["sources"])}
        passages.update(labels)
        documents.update({label.split(" · ")[0] for label in labels})
    return DocumentUse(dict(documents.most_common()), dict(passages.most_common()),
                       sorted(name for name in known if name not in documents))
