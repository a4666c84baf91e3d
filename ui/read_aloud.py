"""What a reply's 朗读 Read aloud button (`public/elements/ReplyFooter.jsx`) hands the browser's own speech synthesis:
the reply's words without their Markdown marks, and the language to read them in.

The text is the model's reply as it ended, before the sources line and the marks under it are added
(`chat.check.cite`), so those are never read. Nothing goes to a server: the visitor's browser speaks, with a voice of
that language, and the button is hidden where the browser has none.
"""

from __future__ import annotations

import re

from config.markdown_text import blocks
from config.writing import HAN

_MARKS = str.maketrans("|*_`~", "     ")  # a table's bars and emphasis the parser left as text are not read


def speech(reply: str) -> dict[str, str]:
    """The props of the footer's button: `text` to read and its `lang` (a BCP 47 tag, as the speech API takes). Its time
    grows linearly with the reply (a real Markdown parser, no regular expression that backtracks)."""
    lines = (" ".join(line.translate(_MARKS).split()) for block in blocks(reply, addresses=False)
             for line in block.text.split("\n"))
    return {"text": "\n".join(line for line in lines if line), "lang": language(reply)}


def language(reply: str) -> str:
    """English where the reply has more Latin words than Chinese characters (an English reply gives names in
    Chinese in brackets; a Chinese one may name a place in English), else Chinese."""
    words = len(re.findall(r"[A-Za-z]+", reply))
    characters = sum(len(run) for run in HAN.findall(reply))
    return "en-US" if words > characters else "zh-CN"
