"""What the page shows of a reply's sources: each passage it drew on in the side panel, opened by its name under the
reply, also when a conversation is resumed; and, in the teaching view, the passages retrieved for a prompt. The
reply's check against them is `chat.check`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import chainlit as cl


@dataclass(frozen=True)
class Shown:
    """A passage retrieved, as the page shows it: its label (document · section), its document's title, its words
    as the prompt has them, its search score."""

    label: str
    title: str
    text: str
    score: float


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


def passages_table(found: list[Shown], prompt_text: str) -> str:
    """The teaching view's table: each passage found, its score, and the lines it takes in the rendered prompt."""
    if not found:
        return "**检索 Retrieval**：没有找到相关资料 no passage found; the prompt says so.\n\n"
    rows = ["| # | BM25 | 来源 source | 提示词中的行 prompt lines |", "|---|---|---|---|"]
    for number, passage in enumerate(found, 1):
        start = prompt_text.find(passage.text)
        first = prompt_text.count("\n", 0, start) + 1
        rows.append(f"| {number} | {passage.score:.2f} | {passage.label} | "
                    f"{first}–{first + passage.text.count(chr(10))} |")
    return "**检索 Retrieval**（关键词 BM25，按得分排序 best first）\n\n" + "\n".join(rows) + "\n\n"
