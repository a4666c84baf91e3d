"""How the knowledge benchmark scores a reply (`bench.knowledge`): its question set and the rule that splits it into a
development half and a test half, a reply's page text parsed into what the model said and what the app put under it,
and the figures of each half: right, source named, said in words, flagged, unmarked, in the visitor's language.
"""

from __future__ import annotations

import re
import tomllib
import zlib
from pathlib import Path

from config.settings import PROJECT_ROOT
from config.writing import simplified
from history.conversation import SOURCES_MARK, UNCHECKED, UNSUPPORTED_MARK, model_text
from retrieval.checking import claims, holds, numbers
from retrieval.index import documents_in
from retrieval.reading import read_document

QUESTIONS = Path(__file__).with_name("knowledge_questions.toml")
SAMPLES = Path(__file__).with_name("samples")
GUIDE = PROJECT_ROOT / "knowledge"
OUT = PROJECT_ROOT / "docs" / "benchmark"
COVERED = ("guide", "english", "mixed", "traditional", "visitors", "conversation", "handbook")  # the documents answer
HALVES = ("development", "test")
HONEST = ("没有", "不知道", "不清楚", "无法", "未提及", "没提到", "未找到", "未说明", "并未", "未包含", "不确定",
          "no information", "not cover", "don't have", "do not have", "doesn't mention", "does not mention",
          "not mentioned", "not available", "don't know", "do not know", "not sure", "unable to", "not provided",
          "not listed", "no mention", "情報がありません", "情報はありません", "わかりません", "정보가 없습니다", "정보는 없습니다",
          "모르겠습니다")


def load_questions() -> dict[str, list[dict]]:
    return tomllib.loads(QUESTIONS.read_text(encoding="utf-8"))


def turns(item: dict) -> list[str]:
    """The questions an item asks in one chat: a conversation's, in order, or its one question."""
    return item.get("questions") or [item["question"]]


def half(item: dict) -> str:
    """The half an item belongs to, by its entry (its `entry`, else its `source`): the development half when the
    CRC-32 of the entry's name (UTF-8) is even. Every question on one entry falls in the same half."""
    return HALVES[zlib.crc32((item.get("entry") or item["source"]).encode()) % 2]


def in_their_language(question: str, answer: str) -> bool:
    """Whether a Japanese question got kana in its answer, or a Korean one Hangul."""
    for script in (r"[\u3040-\u30ff]", r"[\uac00-\ud7af]"):
        if re.search(script, question):
            return bool(re.search(script, answer))
    return True


def right(answer: str, keys: list[list[str]]) -> bool:
    """Whether an answer holds a phrase of every group of `keys`, compared in Simplified characters: a reply in the
    visitor's Traditional ones ("花崗巖") is as right as in Simplified ("花岗岩")."""
    compact = simplified(answer).replace(" ", "").lower()
    return all(any(simplified(key).replace(" ", "").lower() in compact for key in group) for group in keys)


def honest(answer: str) -> bool:
    """Whether a reply says in words that the guide does not hold the answer, in any script of Chinese."""
    return any(phrase in text for text in {answer.lower(), simplified(answer).lower()} for phrase in HONEST)


def parse(reply: str) -> dict:
    """A reply's page text split into what the model said and what the app put under it."""
    answer = model_text(reply)
    sources_line = reply.partition(SOURCES_MARK)[2].split(UNSUPPORTED_MARK)[0]
    marked = reply.partition(UNSUPPORTED_MARK)[2]
    return {"answer": answer, "sources": [name.split(" · ")[0] for name in sources_line.split("；") if name],
            "not_in_sources": [claim for claim in marked.split("、") if claim], "unchecked": UNCHECKED in reply}


def outside_source(reply: dict) -> list[str]:
    """The figures a grounded reply states that none of the documents it names holds anywhere."""
    if not reply["sources"]:
        return []
    cited = [read_document(path) for path in [*documents_in(GUIDE), *documents_in(SAMPLES)] if path.stem in reply["sources"]]
    text = "\n".join([reply["question"], *(f"{heading}\n{body}" for document in cited for heading, body in document.sections)])
    return [claim for claim in claims(reply["answer"]) if numbers(claim) and not holds(text, claim)]


def halves(questions: dict[str, list[dict]], replies: list[dict]) -> dict:
    """The figures of each half, from the replies to every question in order (`through_the_app`)."""
    asked = [(kind, item) for kind in (*COVERED, "uncovered") for item in questions[kind]]
    return {part: summary([(kind, item, reply) for (kind, item), reply in zip(asked, replies) if half(item) == part])
            for part in HALVES}


def summary(asked: list[tuple[str, dict, dict]]) -> dict:
    """The figures of one half: (kind, item, reply) for each question asked."""
    def share(items: list[bool]) -> float | None:
        return round(sum(items) / len(items), 3) if items else None

    figures = {}
    for kind in COVERED:
        got = [(item, reply) for kind_, item, reply in asked if kind_ == kind]
        figures[f"{kind}_right"] = share([right(reply["answer"], item["keys"]) for item, reply in got])
        figures[f"{kind}_source_named"] = share([item["source"] in reply["sources"] for item, reply in got])
    uncovered = [reply for kind, _, reply in asked if kind == "uncovered"]
    figures["uncovered_said"] = share([honest(reply["answer"]) for reply in uncovered])
    figures["uncovered_said_or_marked"] = share([honest(reply["answer"]) or reply["unchecked"]
                                                 or bool(reply["not_in_sources"]) for reply in uncovered])
    covered = [(item, reply) for kind, item, reply in asked if kind != "uncovered"]
    rights = [right(reply["answer"], item["keys"]) for item, reply in covered]
    figures["right_flagged"] = share([bool(reply["not_in_sources"]) for (_, reply), ok in zip(covered, rights) if ok])
    figures["wrong_unmarked"] = share([not (reply["not_in_sources"] or reply["unchecked"] or honest(reply["answer"]))
                                       for (_, reply), ok in zip(covered, rights) if not ok])
    figures["visitors_in_their_language"] = share([in_their_language(item["question"], reply["answer"])
                                                   for kind, item, reply in asked if kind == "visitors"])
    outside = [(reply, outside_source(reply)) for _, reply in covered]
    figures["figure_outside_source"] = share([bool(claims_) for _, claims_ in outside])
    figures["figure_outside_source_unmarked"] = share([any(claim not in reply["not_in_sources"] for claim in claims_)
                                                       for reply, claims_ in outside])
    return figures
