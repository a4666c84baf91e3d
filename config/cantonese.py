"""Written Cantonese in Mandarin's words, as the model reads a visitor's question (`in_mandarin`, by the table in
`cantonese.toml`): the demo models misread the Cantonese ("北京路步行街使唔使買門票？" got "资料里没有这方面的信息" beside
"不收门票"), in Simplified characters as much as in Traditional ones. The search for passages and the check whether they
answer the question (`retrieval.grounding.unanswered`) read it so too: jieba cuts the visitor's words apart where no
passage does ("係誰題嘅" gives 谁题, "建了幾多年" 多年), and a question the guide answers was told it does not. The chat,
and the check of a reply's figures, keep the visitor's own words; the reply comes in their script (`chat.script`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from config.message import Message
from config.writing import in_traditional, simplified

MARKERS = frozenset("嘅係喺咩冇佢唔嗰啲咗嚟")  # characters only written Cantonese uses
# Its question words, which a visitor may write in Simplified characters without any marker ("花塔有几多层？").
_WORDS = re.compile("几多|几耐|边度|边个|点样|点解")
_IN_MANDARIN = [(re.compile(pattern), words) for pattern, words in
                tomllib.loads(Path(__file__).with_name("cantonese.toml").read_text(encoding="utf-8"))["words"]]


def in_mandarin(text: str) -> str:
    """A message in written Cantonese in Mandarin's words and Simplified characters; any other as it is (a question
    in Traditional characters may hold a Cantonese word and none of the markers: "沙面有幾大？")."""
    if not (MARKERS & set(text) or _WORDS.search(text) or in_traditional(text)):
        return text
    mandarin = text
    for pattern, words in _IN_MANDARIN:
        mandarin = pattern.sub(words, mandarin)
    return simplified(mandarin) if mandarin != text else text


def as_the_model_reads(history: list[Message]) -> list[Message]:
    """`history` with the visitor's questions in written Cantonese in Mandarin's words (`in_mandarin`)."""
    return [{**message, "content": in_mandarin(message["content"])} if message["role"] == "user" else message
            for message in history]
