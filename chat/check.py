"""A finished reply checked against its sources, with the knowledge base on: the passages it drew on named in a line
under it (document file name without extension · section), the figures and names of the reply that the passages it was
given do not hold (`retrieval.checking`), or the mark of a reply that drew on no passage and does not say that the
documents are silent. The passages are stored in the reply's metadata (elements are not), and the page shows each
(`ui.sources`); with the teaching view on, each claim and the passage that holds it.
"""

from __future__ import annotations

import asyncio

import chainlit as cl

from config.cantonese import in_mandarin
from config.writing import simplified
from history.conversation import APPENDED, REPLY, SOURCES, SOURCES_MARK, UNCHECKED, UNSUPPORTED_MARK
from retrieval.checking import Holder, claims, source_text, unsupported
from retrieval.grounding import claims_a_source, drawn_on, label, says_not_covered, unanswered
from retrieval.index import Found
from ui.sources import Shown, elements

CHECKED = "unsupported"  # in a reply's REPLY metadata: the claims the passages do not hold


async def cite(reply: cl.Message, found: list[Found], question: str, teaching: bool,
               known: frozenset[str] = frozenset()) -> None:
    """Put under a finished reply to `question` (with the knowledge base on, `found` given) its sources, the claims
    they do not hold (`known`: the places the knowledge base knows), or the mark of a reply not checked; with the
    teaching view on, the check claim by claim. The reply is read off the event loop: its time grows with the
    reply's length."""
    lines, used, missing = await asyncio.to_thread(appended, reply.content, found, question, known)
    if used:
        reply.elements += elements(stored(used))
        reply.metadata[REPLY] |= {SOURCES: stored(used), CHECKED: missing}
    if teaching and found:
        table = await asyncio.to_thread(check_table, reply.content, found, used, known)
        reply.elements += [cl.Text(name="核对 Check", content=table, display="inline")]
    reply.content += lines
    reply.metadata[REPLY][APPENDED] = len(lines)


def appended(said: str, found: list[Found], question: str,
             known: frozenset[str] = frozenset()) -> tuple[str, list[Found], list[str]]:
    """The lines to put under what the model `said`, the passages it drew on, and the claims they do not hold; a reply
    that says it answers from the sources ("根据参考资料") where no sentence of them bears on the question
    (`grounding.unanswered`, asked in the words the model read: `config.cantonese.in_mandarin`) has that saying among them.
    A reply (`chat.script`) or a question in Traditional characters is read in Simplified ones, as the sources are
    written."""
    said, mandarin, question = simplified(said), in_mandarin(question), simplified(question)
    used = drawn_on(found, said, question)
    if used:
        missing = unsupported(said, found, used, question, known)
        missing += [claimed] if (claimed := claims_a_source(said)) and unanswered(found, mandarin) else []
        return sources_line(used) + (UNSUPPORTED_MARK + "、".join(missing) if missing else ""), used, missing
    return ("" if says_not_covered(said) else UNCHECKED), [], []


def check_table(said: str, found: list[Found], used: list[Found], known: frozenset[str] = frozenset()) -> str:
    """The teaching view's check: each figure, quoted name and place of the reply, and the passages that hold it (or
    the document of one it drew on)."""
    said = simplified(said)
    rows, passages = [], [Holder(source_text(passage), known) for passage in found]
    documents = [Holder(passage.document, known) for passage in used]
    for claim in claims(said, known):
        holding = [f"[{number}]" for number, passage in enumerate(passages, 1) if passage.holds(claim)]
        holding += ["📄"] if not holding and any(document.holds(claim) for document in documents) else []
        rows.append(f"| {claim} | {'、'.join(holding) or '✗ 未见 not found'} |")
    if not rows:
        return "**核对 Check**：回答里没有数字或引号中的名称 no figure or quoted name in the reply."
    return "**核对 Check**（回答中的数字和名称，在哪段资料里 figures and names, and the passages holding them）\n\n" \
           "| 回答中 in the reply | 资料 passage |\n|---|---|\n" + "\n".join(rows)


def sources_line(found: list[Found]) -> str:
    return SOURCES_MARK + "；".join(dict.fromkeys(label(passage) for passage in found))


def stored(found: list[Found]) -> list[dict]:
    return [{"label": label(passage), "title": passage.title, "text": passage.whole or passage.text} for passage in found]


def shown(found: list[Found]) -> list[Shown]:
    """The passages as the page shows them."""
    return [Shown(label(passage), passage.title, passage.text, passage.score) for passage in found]


async def show_again(steps: list[dict]) -> None:
    """A resumed conversation's replies get their sources' elements back."""
    for step in steps:
        passages = ((step.get("metadata") or {}).get(REPLY) or {}).get(SOURCES)
        if step.get("type") == "assistant_message" and passages:
            for element in elements(passages, for_id=step["id"]):
                await element.send(for_id=step["id"])
