"""What a reply with the knowledge base on says of its sources, and the retrieved passages in the teaching view.

A reply that drew on passages ends with a line naming each (document file name without extension · section);
each name opens its whole passage in the side panel (a Chainlit Text element of that name). The passages are stored
in the reply's metadata, and the elements sent again when a conversation is resumed (elements are not stored).
Under the sources, a line names the figures and names of the reply that the passages it was given do not hold
(`retrieval.checking`). A reply that drew on no passage, and does not say that the documents are silent, is marked
as not checked against any source. The teaching view shows each claim and the passage that holds it.
"""

from __future__ import annotations

import asyncio

import chainlit as cl

from history.conversation import APPENDED, REPLY, SOURCES, SOURCES_MARK, UNCHECKED, UNSUPPORTED_MARK
from retrieval.checking import Holder, claims, source_text, unsupported
from retrieval.grounding import claims_a_source, drawn_on, label, says_not_covered, unanswered
from retrieval.index import Found
from retrieval.terms import simplified

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
    (`grounding.unanswered`) has that saying among them. A reply (`ui.script`) or a question in Traditional characters
    is read in Simplified ones, as the sources are written."""
    said, question = simplified(said), simplified(question)
    used = drawn_on(found, said, question)
    if used:
        missing = unsupported(said, found, used, question, known)
        missing += [claimed] if (claimed := claims_a_source(said)) and unanswered(found, question) else []
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


def elements(passages: list[dict], for_id: str | None = None) -> list[cl.Text]:
    """One side-panel element per label (two passages of one section are shown together)."""
    texts: dict[str, list[str]] = {}
    titles = {}
    for passage in passages:
        texts.setdefault(passage["label"], []).append(passage["text"])
        titles[passage["label"]] = passage["title"]
    return [cl.Text(name=name, content=f"**《{as_text(titles[name])}》**\n\n" + "\n\n…\n\n".join(map(as_text, parts)),
                    display="side", for_id=for_id) for name, parts in texts.items()]


def as_text(passage: str) -> str:
    """A passage's words shown as they are: the panel renders Markdown, in which brackets could still form an image
    (a document's escaped `!\\[…](…)` reads as those characters) that every visitor opening it would fetch."""
    return passage.translate(_ESCAPED)


_ESCAPED = str.maketrans({character: "\\" + character for character in "\\[]<>!"})


async def show_again(steps: list[dict]) -> None:
    """A resumed conversation's replies get their sources' elements back."""
    for step in steps:
        passages = ((step.get("metadata") or {}).get(REPLY) or {}).get(SOURCES)
        if step.get("type") == "assistant_message" and passages:
            for element in elements(passages, for_id=step["id"]):
                await element.send(for_id=step["id"])


def passages_table(found: list[Found], prompt_text: str) -> str:
    """The teaching view's table: each passage found, its score, and the lines it takes in the rendered prompt."""
    if not found:
        return "**检索 Retrieval**：没有找到相关资料 no passage found; the prompt says so.\n\n"
    rows = ["| # | BM25 | 来源 source | 提示词中的行 prompt lines |", "|---|---|---|---|"]
    for number, passage in enumerate(found, 1):
        start = prompt_text.find(passage.text)
        first = prompt_text.count("\n", 0, start) + 1
        rows.append(f"| {number} | {passage.score:.2f} | {label(passage)} | "
                    f"{first}–{first + passage.text.count(chr(10))} |")
    return "**检索 Retrieval**（关键词 BM25，按得分排序 best first）\n\n" + "\n".join(rows) + "\n\n"
