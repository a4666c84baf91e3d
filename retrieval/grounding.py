"""What the model is given from the knowledge base, and which passages a reply drew on.

The persona's system prompt gets fixed rules (so its prefix stays cached); the passages found go into the newest
question only, numbered, with their document and section, within a budget of characters. The search text is the
newest question with the one before it, so a follow-up ("它几点开门？") still finds what the conversation is about.
A reply drew on a passage when it repeats something of it that the question did not already say, and says
nothing of the documents being silent (`drawn_on`).
"""

from __future__ import annotations

import re
from dataclasses import replace

from config.message import Message
from retrieval.index import Found

NOT_COVERED = "资料里没有这方面的信息"
RULES = f"""

【参考资料的用法】用户的问题前面可能附有【参考资料】。回答事实（地点、年代、数字、时间、价格、交通）时，只使用参考资料里写明的内容，不要编造资料里没有的名称和数字。如果参考资料没有涉及用户问的内容，请直接说“{NOT_COVERED}”，可以建议用户查询官方渠道。不要在回答里提“参考资料”的编号。"""
NOTHING_FOUND = "【参考资料】资料库里没有找到与这个问题相关的内容。"
_UNITS = re.compile(r"[\u3400-\u9fff]{2,}|[a-z][a-z0-9]+|[0-9]+[.:][0-9]+|[0-9]{2,}")  # a lone digit says little


def search_text(history: list[Message]) -> str:
    questions = [message["content"] for message in history if message["role"] == "user"]
    return "\n".join(questions[-2:])


def within(found: list[Found], budget_chars: int) -> list[Found]:
    """The best passages whose texts together fit `budget_chars` (the best one always, cut to fit)."""
    kept, used = [], 0
    for passage in found:
        if used + len(passage.text) > budget_chars:
            break
        kept.append(passage)
        used += len(passage.text)
    if found and not kept:
        kept = [replace(found[0], text=found[0].text[:budget_chars])]
    return kept


def label(passage: Found) -> str:
    """How a passage is named to the visitor: its document's file name without extension, and its section."""
    return f"{passage.name} · {passage.section}" if passage.section else passage.name


def grounded(history: list[Message], found: list[Found]) -> list[Message]:
    """`history` with the newest question preceded by the passages (or by a line saying none was found)."""
    if found:
        blocks = [f"[{number}] 《{passage.title}》{passage.section}（{passage.name}）\n{passage.text}"
                  for number, passage in enumerate(found, 1)]
        context = "【参考资料】\n" + "\n\n".join(blocks)
    else:
        context = NOTHING_FOUND
    question = history[-1]
    return [*history[:-1], {"role": question["role"], "content": f"{context}\n\n【问题】\n{question['content']}"}]


def drawn_on(found: list[Found], reply: str, question: str) -> list[Found]:
    """The passages a reply drew on: those it repeats the most of, and at least half as much as the best one,
    counting pairs of Chinese characters, words and numbers of two digits or more (a number counts twice) that the
    question did not already hold. None when it repeats nothing, or says the documents do not cover the question."""
    if NOT_COVERED in reply:
        return []
    said = _units(reply) - _units(question)
    shares = [sum(2 if unit.isdigit() else 1 for unit in said & _units(passage.text)) for passage in found]
    best = max(shares, default=0)
    return [passage for passage, share in zip(found, shares) if share and share >= best / 2]


def _units(text: str) -> set[str]:
    units = set()
    for run in _UNITS.findall(text.lower()):
        units.update([run[i:i + 2] for i in range(len(run) - 1)] if "\u3400" <= run[0] <= "\u9fff" else [run])
    return units
