"""What a reply's 朗读 Read aloud button (`public/elements/ReplyFooter.jsx`) hands the browser's own speech synthesis:
the reply's words without their Markdown marks, and the language to read them in.

The text is the model's reply as it ended, before the sources line and the marks under it are added
(`ui.sources.cite`), so those are never read. Nothing goes to a server: the visitor's browser speaks, with a voice of
that language, and the button is hidden where the browser has none.
"""

from __future__ import annotations

import re

from retrieval.terms import HAN

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")  # [text](address): the text is read
_BLOCKS = re.compile(r"^\s*(#+|[-*+>]|\|?\s*:?-{3,}.*)\s|\|", re.MULTILINE)  # headings, bullets, quotes, tables
_EMPHASIS = re.compile(r"[*_`~]+")


def speech(reply: str) -> dict[str, str]:
    """The props of the footer's button: `text` to read and its `lang` (a BCP 47 tag, as the speech API takes)."""
    lines = (re.sub(r"\s+", " ", line).strip() for line in _EMPHASIS.sub("", _BLOCKS.sub(" ", _LINK.sub(r"\1", reply))).split("\n"))
    return {"text": "\n".join(line for line in lines if line), "lang": language(reply)}


def language(reply: str) -> str:
    """English where the reply has more Latin words than Chinese characters (an English reply gives names in
    Chinese in brackets; a Chinese one may name a place in English), else Chinese."""
    words = len(re.findall(r"[A-Za-z]+", reply))
    characters = sum(len(run) for run in HAN.findall(reply))
    return "en-US" if words > characters else "zh-CN"
