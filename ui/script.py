"""A reply in the visitor's script: a question written in Traditional characters (陳家祠門票幾多錢？) gets its reply in
them, converted as it streams by OpenCC (`s2t`) from the Simplified the demo models write best. Each delta is converted
as it comes: a word split between two deltas may take a character's commoner form (发 as 發 where 頭髮 wanted 髮).
The sources check reads the reply in Simplified characters again (`retrieval.terms.simplified`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import opencc

from engine.api import ReplyEvent, TextDelta
from retrieval.terms import HAN, simplified

_TO_TRADITIONAL = opencc.OpenCC("s2t")


def in_traditional(question: str) -> bool:
    """Whether a Chinese question is written in Traditional characters (a Japanese one has its own forms)."""
    return bool(HAN.search(question)) and simplified(question) != question and not _has_kana(question)


def _has_kana(text: str) -> bool:
    return any("\u3040" <= character <= "\u30ff" for character in text)


async def in_script(events: AsyncIterator[ReplyEvent], question: str) -> AsyncIterator[ReplyEvent]:
    """`events` with the reply's text in the question's script (its thinking as the model wrote it)."""
    convert = in_traditional(question)
    async for event in events:
        if convert and isinstance(event, TextDelta) and event.kind == "answer":
            event = replace(event, text=_TO_TRADITIONAL.convert(event.text))
        yield event
