"""A reply in the visitor's script: a question written in Traditional characters (陳家祠門票幾多錢？) gets its reply in
them, converted as it streams by OpenCC from the Simplified the demo models write best: in Hong Kong's forms (`s2hk`)
for a question in written Cantonese (嘅, 係, 喺), else in Taiwan's (`s2tw`: 峰, 裡, 著, where OpenCC's own `s2t` writes
峯, 裏, 着). Each delta is converted
as it comes: a word split between two deltas may take a character's commoner form (发 as 發 where 頭髮 wanted 髮).
The sources check reads the reply in Simplified characters again (`config.writing.simplified`).

A question in written Cantonese is shown to the model in Mandarin's words and Simplified characters (`in_mandarin`,
by the table in `cantonese.toml`): the demo models misread the Cantonese ("北京路步行街使唔使買門票？" got "资料里没有这方面的
信息" beside "不收门票"), in Simplified characters as much as in Traditional ones. The chat, the search and the check keep
the visitor's own words.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import opencc

from config.message import Message
from config.writing import HAN, KANA, simplified
from engine.api import ReplyEvent, TextDelta

_HONG_KONG, _TAIWAN = opencc.OpenCC("s2hk"), opencc.OpenCC("s2tw")
_CANTONESE = frozenset("嘅係喺咩冇佢唔嗰啲咗嚟")
_IN_MANDARIN = [(re.compile(pattern), words) for pattern, words in
                tomllib.loads(Path(__file__).with_name("cantonese.toml").read_text(encoding="utf-8"))["words"]]


def in_traditional(question: str) -> bool:
    """Whether a Chinese question is written in Traditional characters (a Japanese one has its own forms)."""
    return bool(HAN.search(question)) and simplified(question) != question and not KANA.search(question)


def in_mandarin(text: str) -> str:
    """A message in written Cantonese in Mandarin's words and Simplified characters; any other as it is (a question
    in Traditional characters may hold a Cantonese word and none of the markers: "沙面有幾大？")."""
    if not (_CANTONESE & set(text) or in_traditional(text)):
        return text
    mandarin = text
    for pattern, words in _IN_MANDARIN:
        mandarin = pattern.sub(words, mandarin)
    return simplified(mandarin) if mandarin != text else text


def as_the_model_reads(history: list[Message]) -> list[Message]:
    """`history` with the visitor's questions in written Cantonese in Mandarin's words (`in_mandarin`)."""
    return [{**message, "content": in_mandarin(message["content"])} if message["role"] == "user" else message
            for message in history]


def _converter(question: str) -> opencc.OpenCC | None:
    return (_HONG_KONG if _CANTONESE & set(question) else _TAIWAN) if in_traditional(question) else None


def in_their_script(text: str, question: str) -> str:
    """`text` in the question's script."""
    converter = _converter(question)
    return converter.convert(text) if converter else text


async def in_script(events: AsyncIterator[ReplyEvent], question: str) -> AsyncIterator[ReplyEvent]:
    """`events` with the reply's text in the question's script (its thinking as the model wrote it)."""
    converter = _converter(question)
    async for event in events:
        if converter and isinstance(event, TextDelta) and event.kind == "answer":
            event = replace(event, text=converter.convert(event.text))
        yield event
