"""Search terms of a Chinese (or mixed) text: jieba's words (`rjieba`, search mode, which adds the shorter words
inside a long one), lower-cased, without punctuation or the commonest function words; optionally every pair of
adjacent Chinese characters too.

Words alone are the default: on our question set they put the right document first more often than words with
pairs (`bench.knowledge` measures both each run, docs/knowledge.md has the figures).
"""

from __future__ import annotations

import re

import rjieba

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"\w", re.UNICODE)
STOP = frozenset("的 了 是 在 和 与 及 或 吗 呢 吧 啊 呀 么 我 你 他 她 它 我们 你们 请 请问 一下 什么 怎么 怎样 哪 哪些 哪里 "
                 "哪儿 多少 几 有 有没有 没有 这 那 这个 那个 一个 可以 能 会 要 想 去 吃 也 都 还 就 和 跟 给 被 把 对 "
                 "从 到 为 为什么 如何".split())


def terms(text: str, pairs: bool = False) -> list[str]:
    lowered = text.lower()
    words = [word for word in rjieba.cut_for_search(lowered) if _WORD.search(word) and word not in STOP]
    if pairs:
        words += [run[i:i + 2] for run in _HAN.findall(lowered) for i in range(len(run) - 1)]
    return words
