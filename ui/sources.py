"""Sources under a grounded reply, and the retrieved passages in the teaching view.

A reply that drew on passages ends with a line naming each (document file name without extension · section);
each name opens its passage in the side panel (a Chainlit Text element of that name). The passages are stored in
the reply's metadata, and the elements sent again when a conversation is resumed (elements are not stored).
"""

from __future__ import annotations

import chainlit as cl

from history.conversation import REPLY, SOURCES, SOURCES_MARK
from retrieval.grounding import label
from retrieval.index import Found


def sources_line(found: list[Found]) -> str:
    return SOURCES_MARK + "；".join(dict.fromkeys(label(passage) for passage in found))


def stored(found: list[Found]) -> list[dict]:
    return [{"label": label(passage), "title": passage.title, "text": passage.text} for passage in found]


def elements(passages: list[dict], for_id: str | None = None) -> list[cl.Text]:
    """One side-panel element per label (two passages of one section are shown together)."""
    texts: dict[str, list[str]] = {}
    titles = {}
    for passage in passages:
        texts.setdefault(passage["label"], []).append(passage["text"])
        titles[passage["label"]] = passage["title"]
    return [cl.Text(name=name, content=f"**《{titles[name]}》**\n\n" + "\n\n…\n\n".join(parts), display="side",
                    for_id=for_id) for name, parts in texts.items()]


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
