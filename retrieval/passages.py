"""A document cut into passages the prompt can hold, at most `MAX_CHARS` each: whole paragraphs (a longer one cut at
sentence ends), and short sections that follow each other kept together, each under its heading. A passage knows its
document's title and its sections. Short passages would rank by their few words alone (BM25 favours them) and
give the model a fact without its context."""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval.reading import Document

MAX_CHARS = 500
# A section of these names lists where a document comes from, not what it says: it is not a passage.
SOURCE_SECTIONS = frozenset({"来源", "参考", "参考资料", "资料来源", "sources", "references"})


@dataclass(frozen=True)
class Passage:
    title: str  # the document's
    section: str
    text: str


def passages(document: Document) -> list[Passage]:
    pieces = [(heading, chunk) for heading, text in document.sections
              if heading.strip().lower() not in SOURCE_SECTIONS for chunk in _chunks(text)]
    found, headings, lines = [], [], []
    for heading, chunk in pieces:
        line = f"{heading}：\n{chunk}" if heading and heading not in headings else chunk
        if lines and sum(map(len, lines)) + len(line) > MAX_CHARS:
            found.append(Passage(document.title, "、".join(headings), "\n".join(lines)))
            headings, lines = [], []
            line = f"{heading}：\n{chunk}" if heading else chunk
        headings += [heading] if heading and heading not in headings else []
        lines.append(line)
    return found + ([Passage(document.title, "、".join(headings), "\n".join(lines))] if lines else [])


def _chunks(text: str) -> list[str]:
    pieces = [piece for paragraph in re.split(r"\n\s*\n", text) for piece in _sentences(paragraph.strip()) if piece]
    chunks, current = [], ""
    for piece in pieces:
        if current and len(current) + 1 + len(piece) > MAX_CHARS:
            chunks.append(current)
            current = ""
        current = f"{current}\n{piece}" if current else piece
    return chunks + ([current] if current else [])


def _sentences(paragraph: str) -> list[str]:
    """A paragraph within `MAX_CHARS` as it is, a longer one in runs of whole sentences (or hard cuts)."""
    if len(paragraph) <= MAX_CHARS:
        return [paragraph]
    runs, current = [], ""
    for sentence in re.findall(r"[^。！？!?.\n]*[。！？!?.\n]?", paragraph):
        for start in range(0, len(sentence), MAX_CHARS):  # a sentence longer than a passage is cut hard
            part = sentence[start:start + MAX_CHARS]
            if current and len(current) + len(part) > MAX_CHARS:
                runs.append(current)
                current = ""
            current += part
    return runs + ([current] if current.strip() else [])
