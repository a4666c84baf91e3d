"""How a text is written: runs of Han characters, Japanese kana, and the same text in Simplified characters (OpenCC's
`t2s`, so that 陳家祠 reads as 陈家祠; in a Japanese text its forms first by `jp2t`, 広東 as 广东). Shared by the search
(`retrieval.terms`), the reply in the visitor's script (`chat.script`) and the voice a reply is read aloud in.
"""

from __future__ import annotations

import re

import opencc

HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
KANA = re.compile(r"[\u3040-\u30ff]")  # Japanese hiragana and katakana
_TO_SIMPLIFIED = opencc.OpenCC("t2s")  # Traditional characters to Simplified (phrases, then characters)
_FROM_JAPANESE = opencc.OpenCC("jp2t")  # Japanese forms (広, 館) to Traditional ones


def in_traditional(question: str) -> bool:
    """Whether a Chinese question is written in Traditional characters (a Japanese one has its own forms)."""
    return bool(HAN.search(question)) and simplified(question) != question and not KANA.search(question)


def simplified(text: str) -> str:
    """`text` in Simplified characters, from Traditional ones or, in a Japanese text, from Japanese ones."""
    return _TO_SIMPLIFIED.convert(_FROM_JAPANESE.convert(text) if KANA.search(text) else text)
