"""A reply in the visitor's script: a question written in Traditional characters (陳家祠門票幾多錢？) gets its reply in
them, converted as it streams by OpenCC from the Simplified the demo models write best: in Hong Kong's forms (`s2hk`)
for a question in written Cantonese (嘅, 係, 喺), else in Taiwan's (`s2tw`: 峰, 裡, 著, where OpenCC's own `s2t` writes
峯, 裏, 着). Each delta is converted
as it comes: a word split between two deltas may take a character's commoner form (发 as 發 where 頭髮 wanted 髮).
The sources check reads the reply in Simplified characters again (`config.writing.simplified`).

A question in written Cantonese is read by the model in Mandarin's words (`config.cantonese`); its reply comes in
Hong Kong's forms all the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import opencc

from config.cantonese import MARKERS
from config.writing import in_traditional
from engine.api import ReplyEvent, TextDelta

_HONG_KONG, _TAIWAN = opencc.OpenCC("s2hk"), opencc.OpenCC("s2tw")


def _converter(question: str) -> opencc.OpenCC | None:
    return (_HONG_KONG if MARKERS & set(question) else _TAIWAN) if in_traditional(question) else None


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
