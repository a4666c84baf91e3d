"""Search terms of a text in Chinese, English or both, in any written Chinese: the text in Simplified characters
(`config.writing.simplified`, so that 陳家祠 finds 陈家祠 and 広東 广东), then jieba's
words (`rjieba`, search mode, which adds the shorter words inside a long one), lower-cased, without punctuation or the
commonest function words of Mandarin, written Cantonese (係, 嘅, 幾多, 邊度) and English; an English word in its
singular ("towers", "tower's" → "tower"); optionally every pair of adjacent Chinese characters.
`romanized` gives a title's pinyin, so that a visitor who types "Chenjiaci" or "Shamian" finds 陈家祠 and 沙面;
`translated` the Chinese words of a question's English and Korean words (`glossary.toml`), so that "How tall…" and
"높이는…" find the sentence that gives the height; `said_otherwise` the words a passage may answer a Chinese question's
words with.

Korean, which jieba cuts into single syllables, is searched by its pairs of adjacent syllables, as Lucene's CJK bigram
filter does: "광저우 타워의" holds 광저, 저우 and 타워, so it finds an entry whose other names include 광저우 타워 whatever
particle follows the name.

Words alone are the default: on our question set they put the right document first more often than words with
pairs (`bench.knowledge` measures both each run, docs/knowledge.md has the figures).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import rjieba
from pypinyin import lazy_pinyin

from config.writing import HAN, simplified

_WORD = re.compile(r"\w", re.UNICODE)
# The words of written Cantonese that only join the others ("係" is, "嘅" of, "喺" at, "咩" what): cut out before jieba,
# which would otherwise join them to the word before ("六榕寺個名係點嚟嘅": 名系, "關公獅係咩顏色": 狮系).
_CANTONESE = re.compile("[係嘅喺咗嚟咩乜佢哋唔冇啲嗰嘢俾]")
_LATIN = re.compile(r"[a-z]+")
HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]+")
GLOSSARY: dict[str, list[str]] = tomllib.loads(Path(__file__).with_name("glossary.toml").read_text(encoding="utf-8"))
SAID_OTHERWISE: dict[str, list[str]] = GLOSSARY.pop("said_otherwise")
KOREAN: dict[str, list[str]] = GLOSSARY.pop("korean")
COMMON = 100  # a word jieba's dictionary counts this often is a common word, not a name
_PROPER = frozenset(("nr", "ns", "nt", "nz"))  # jieba's tags of a person's, a place's, an organisation's, another name
# What visitors ask of any sight, in the guide's words (门票, 闭馆, 停车): the glossary's Chinese words.
FACETS = frozenset(word for words in [*GLOSSARY.values(), *SAID_OTHERWISE.values(), *KOREAN.values(), [*SAID_OTHERWISE]]
                   for word in words)
ENGLISH_STOP = frozenset("a an the is are was were be been do does did of in on at to for from by with about and or but "
                         "not what which who whom whose when where why how much many there it its this that these those "
                         "i me my we our you your he she they them can could should would will shall may might must s "
                         "t".split())
STOP = ENGLISH_STOP | frozenset("的 了 是 在 和 与 及 或 吗 呢 吧 啊 呀 么 我 你 他 她 它 我们 你们 请 请问 一下 什么 怎么 怎样 哪 "
                                "哪些 哪里 哪儿 多少 几 有 有没有 没有 这 那 这个 那个 一个 可以 能 会 要 想 去 吃 也 都 还 就 "
                                "和 跟 给 被 把 对 从 到 为 为什么 如何".split()) | frozenset(
    # written Cantonese, as jieba cuts it once in Simplified characters
    "系 系边 嘅 边 边个 边度 边处 几多 咩 乜 乜嘢 喺 佢 佢哋 冇 点样 点解 呢 呢度 度 啲 咗 嚟 嗰 唔 咁 嘢 个".split())


def terms(text: str, pairs: bool = False) -> list[str]:
    lowered = simplified(_CANTONESE.sub(" ", text)).lower()
    words = [_singular(word) for word in rjieba.cut_for_search(HANGUL.sub(" ", lowered)) if _WORD.search(word)]
    words = [word for word in words if word not in STOP]
    words += [run[i:i + 2] for run in HANGUL.findall(lowered) for i in range(len(run) - 1)]
    if pairs:
        words += [run[i:i + 2] for run in HAN.findall(lowered) for i in range(len(run) - 1)]
    return words


def names_a_thing(word: str) -> bool:
    """Whether a Chinese word is a name rather than what anyone may ask of a sight: jieba tags it a proper noun, or
    its dictionary counts it fewer than `COMMON` times (虾饺, 双皮奶, 关公 are; 好吃, 传说, 停车场 are not), and it is no
    word of the glossary (闭馆)."""
    return word not in FACETS and (rjieba.tag(word)[0][1] in _PROPER or rjieba.suggest_freq(word) < COMMON)


def translated(text: str) -> list[str]:
    """The Chinese words for the English words of a question and for the Korean ones it holds, whatever ending
    follows them ("높이는", "휴관합니까": `glossary.toml`, `korean`), each once."""
    english = [chinese for word in terms(text) for chinese in GLOSSARY.get(word, ())]
    korean = [chinese for word, chineses in KOREAN.items() if word in text for chinese in chineses]
    return list(dict.fromkeys([*english, *korean]))


def said_otherwise(text: str) -> list[str]:
    """The words a passage may answer the Chinese words of a question with (`glossary.toml`, `said_otherwise`:
    几点 → 开放时间, 原来 → 原名), each once."""
    return list(dict.fromkeys(other for word in terms(text) for other in SAID_OTHERWISE.get(word, ())))


def romanized(text: str) -> str:
    """The pinyin of the Chinese words in `text`, each word both joined and as syllables ("chenjiaci chen jia ci")."""
    words = [word for run in HAN.findall(simplified(text)) for word in rjieba.cut(run)]
    return " ".join(f"{''.join(syllables)} {' '.join(syllables)}" if len(syllables) > 1 else syllables[0]
                    for syllables in map(lazy_pinyin, words))


def _singular(word: str) -> str:
    if not _LATIN.fullmatch(word) or len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "ses")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word
