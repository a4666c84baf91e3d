"""What the model is given from the knowledge base, and which passages a reply drew on.

The persona's system prompt gets fixed rules (so its prefix stays cached); the passages found go into the newest
question only, best first, numbered, with their document and section, within a budget of the model's tokens. Of a long
passage the model gets only the sentences that bear on the question (`focused`); the visitor still opens it whole.
A question asked in English, Japanese or Korean is answered in its language. Each question's search decides what it is
about (`search_for`): a question that names a document's sight or topic by any of its names, in any script, searches
for that alone; a follow-up that names none or points back ("它几点开门？", "Which metro station is nearest to it?")
carries the sight the conversation last named, unless it asks about a thing only other documents hold ("关公狮是什么颜色？"
after a question on 六榕寺). A Korean question, whose words no passage holds, finds its sight by the Korean names on the
entry's line of other names, and its passages by the sight's Chinese name and the glossary's Chinese words for its
own. A reply drew on a passage when it repeats something of it that the
question did not already say, and says nothing of the documents being silent (`drawn_on`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from config.message import Message
from config.writing import HAN, KANA, simplified
from retrieval.checking import FREE_HELD, IN_YUAN
from retrieval.index import Found, Held
from retrieval.places import sight
from retrieval.reading import ALIASES
from retrieval.terms import ENGLISH_STOP, GLOSSARY, names_a_thing, said_otherwise, terms, translated

_NAMES = set(terms("广州 guangzhou"))  # the city every question of the guide is about: it tells nothing

NOT_COVERED = "资料里没有这方面的信息"
NOT_COVERED_EN = "The guide has no information on this"
NOT_COVERED_JA = "ガイドの資料にはこの情報がありません"
NOT_COVERED_KO = "가이드 자료에는 이 정보가 없습니다"
RULES = f"""

【参考资料的用法】用户的问题前面可能附有【参考资料】。回答事实（地点、年代、数字、时间、价格、交通）时，只使用参考资料里写明的内容，不要编造资料里没有的名称和数字。如果参考资料没有涉及用户问的内容，请直接说“{NOT_COVERED}”（用英文回答时说“{NOT_COVERED_EN}.”），可以建议用户查询官方渠道。不要在回答里提“参考资料”的编号。"""
NOTHING_FOUND = "【参考资料】资料库里没有找到与这个问题相关的内容。"
_PASSAGES, _QUESTION = "【参考资料】\n", "【问题】\n"  # how the newest question lays out its passages and itself
# The prompt's own layout, which no reply has reason to write: where a model starts writing it out (its passages, the
# question again, seen at the defaults on both demo models), the reply ends (`engine.api.Sampling.stop`).
# "根据【参考资料】，" stays a reply's words, which `appended` checks.
ECHOES = (_PASSAGES, _QUESTION)
NOT_ANSWERED = f"（以上资料里没有直接回答这个问题的句子。如果资料确实没有答案，请直接说“{NOT_COVERED}”，不要猜测。）"
# Words that ask about a sight in general, not for a fact: a question of these alone is answered by any passage.
_GENERAL = frozenset(terms("介绍 简介 讲讲 说说 了解 一下 看看 玩 好玩 值得 推荐 谢谢 麻烦 tell about introduce describe "
                           "overview know visit worth recommend please thank thanks"))
IN_ENGLISH = ("（游客用英文提问：请用英文回答，地名、人名等名称后面用括号附上资料里的中文写法。Answer in English; after each name, "
              "give it in brackets as the passages write it in Chinese.）")  # after a question asked in English
# After a question asked in Japanese or Korean: the reply in that language, and what to say when the guide is silent.
IN_JAPANESE = f"（游客用日语提问：请用日语回答。日本語で答えてください。资料没有答案时说“{NOT_COVERED_JA}”。）"
IN_KOREAN = f"（游客用韩语提问：请用韩语回答。한국어로 답해 주세요. 资料没有答案时说“{NOT_COVERED_KO}”。）"
_KANA_ONLY = re.compile(r"[\u3040-\u30ff]+")  # a Japanese question's grammar (は, ますか), or a loanword no passage holds
_HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff]")
_KOREAN_SPACE = re.compile(r"(?<=[\uac00-\ud7af])\s+(?=[\uac00-\ud7af])")
_UNITS = re.compile(r"[\u3400-\u9fff]{2,}|[a-z][a-z0-9]+|[0-9]+[.:][0-9]+|[0-9]{2,}")  # a lone digit says little
# What a question counts in ("多少棵树？" 棵, "几只考拉？" 只, "哪一年开通的？" 年): only a number in it answers, outside
# the notes in brackets ("（2026 年 12 月整理，未核实）" says when the guide was written, not when a cable car opened).
_MEASURES = "个只家座层位棵条种辆间名人岁栋场年"
_COUNTED = re.compile(rf"(?:多少|几多|几)\s*([{_MEASURES}])|哪一?(年)|\b(?:what|which) (year)\b", re.IGNORECASE)
# jieba's word for a count ("花塔有几层？": 几层), which no sentence holds: it asks for its measure word (层), and the
# count's rule above for a number before it.
_COUNT_WORD = re.compile(rf"(?:多少|几多|几)([{_MEASURES}])")
# A time of day asked ("几点开门？", "what time…"): only a clock time, or "all day", answers it.
_WHEN = re.compile(r"几点|\bwhat time\b", re.IGNORECASE)
_CLOCK = re.compile(r"\d{1,2}\s*[:：]\s*\d{2}|[0-9零一二三四五六七八九十两]+\s*点|全天|24\s*小时|\d\s*[ap]\.?m\b", re.IGNORECASE)
# A time taken asked ("坐多久？", "要多少分钟？", "how long does…"): only a number of minutes, hours, days, weeks, months or
# years answers it ("约 1 个多小时", "半天到一天", "前后用了约 25 年").
_LASTING = re.compile(r"多久|多长时间|(?:多少|几)个?(?:分钟|小时|钟头)|\bhow long (?:does|do|did|will|would|should|to)\b",
                      re.IGNORECASE)
_DURATION = re.compile(r"[0-9零一二三四五六七八九十两半]\s*[个整]?\s*多?\s*(?:分钟|小时|钟头|天|周|星期|个月|年)")
# What the guide defers to others ("门票和开放时间请以寺院公告为准", "请查询官方公告") it does not answer: such a clause
# is no answer to what it names.
_DEFERS = re.compile("为准|请查询|请咨询")
_CLAUSE = re.compile(r"[^。；;！？!?\n]*[。；;！？!?\n]?")
# A price asked ("多少钱？", "how much…"): only a figure in yuan, or "free", answers it (`checking.IN_YUAN`, `FREE_HELD`).
_PRICE = re.compile(r"多少钱|几多钱|票价是?多少|\bhow much\b(?! time)", re.IGNORECASE)
# A size asked ("多高？", "多长？", "how tall…"): only a number in a unit of that size answers it ("多长时间" is a time).
_SIZE = re.compile(r"多(长|宽|高|深|远|重)(?!时间)|\bhow (wide|tall|high|deep|far|heavy)\b", re.IGNORECASE)
_SIZE_UNITS = {"长": "米|公里|千米|km", "宽": "米|公里", "高": "米", "深": "米", "远": "米|公里|千米|分钟|小时",
               "重": "吨|公斤|千克|斤|克"}
_SIZE_UNITS |= {english: _SIZE_UNITS[chinese] for english, chinese in
                {"wide": "宽", "tall": "高", "high": "高", "deep": "深", "far": "远", "heavy": "重"}.items()}
_A_NUMBER = r"[0-9零一二三四五六七八九十百千万两]\s*多?\s*"  # before its measure word or unit: "600 米", "一百多座"
_NOTE = re.compile(r"（[^（）\n]*）|\([^()\n]*\)")
_QUOTED = re.compile(r"[“「《\"]([^”」》\"\n]{2,20})[”」》\"]")  # a name a question quotes: "“金记糖水”的招牌甜品是什么？"
# What a question asks for, apart from what it is about: what follows its first 的 ("星火馆的馆长是谁？": 馆长); in English,
# the thing counted ("How many people…"), the thing of something ("the abbot of…") or what someone did ("Who
# designed…"). The words that only ask for a name or a part ("叫什么", "部分") are not what it asks for.
_FOCUS_EN = re.compile(r"\bhow many (\w+)|\b(?:what|who) (?:is|are|was|were) the ((?:\w+ )+?)of\b|\bwho (\w+ed)\b",
                       re.IGNORECASE)
_NAMING = frozenset(("部分", "叫", "叫做", "称为", "名字", "名称"))
_POINTING = re.compile(rf"[这那哪]一?[个条座家位只种间栋]|{'|'.join(sorted(_NAMING, key=len, reverse=True))}")
_SENTENCE = re.compile(r"[^。！？!?\n]+[。！？!?]?")
_NO_LINKS = str.maketrans("[]", "［］")
FOCUS_ABOVE = 200  # a passage longer than this many characters is cut to the sentences bearing on the question
FEW_HOLDERS = 4  # a word of a follow-up held by no more documents than this, none of them the conversation's, names a thing
SAME_WORDING = 0.75  # share of a question's terms in such a name that make it another wording of it
MAX_ASKED = 32  # the words of a question looked for in a passage's sentences: a question is short, a pasted text is not


# Words that point back at what the conversation is about, in the visitors' languages.
_BACK = re.compile(r"\b(?:it|its|there|that place|this place)\b|它|那里|那儿|这里|这儿|那边|这边|该景点|佢|嗰度|呢度|そこ|それ|"
                   r"あそこ|거기|그곳", re.IGNORECASE)


Holding = Callable[..., dict[str, Held]]  # `KnowledgeIndex.holding`, its folders given


@dataclass(frozen=True)
class Search:
    """What a question's passages are searched for: `text`, within the documents in `documents` (their paths) when
    the conversation names any, else among all."""

    text: str
    documents: frozenset[str] = frozenset()


def named(text: str, names: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """The documents `text` names (`KnowledgeIndex.names`: each document's path with its names), in any script and
    case, English names as whole words, Korean ones however spaced, each with the name found; a name inside a longer
    one found ("Canton" in "Canton Tower") and the city's own name do not count."""
    compact = _joined(simplified(text).lower())
    found = {path: name for path, aliases in names.items() for name in map(_name, aliases)
             if name and re.search(rf"(?<![a-z]){re.escape(name)}(?![a-z])", compact)}
    return {path: name for path, name in found.items()
            if not any(name != other and name in other for other in found.values())}


@functools.lru_cache(maxsize=4096)
def _name(name: str) -> str:
    """A document's name as `named` looks for it: in Simplified characters, lower-case; empty when it says nothing
    (a single letter or character, the city's own name)."""
    plain = _joined(simplified(name).strip().lower())
    return plain if len(plain) > 1 and not set(terms(plain)) <= _NAMES else ""


def _joined(text: str) -> str:
    """`text` with no space between Korean words, which visitors space as they like (광저우 타워, 광저우타워)."""
    return _KOREAN_SPACE.sub("", text)


def search_for(history: list[Message], names: dict[str, tuple[str, ...]], holding: Holding) -> Search:
    """What to search for before the newest question of `history`: the documents it names; when it names none, or
    points back ("它", "it", "there"), also those of the conversation's sight (`_sight_after`), whose names join the
    search, unless it names none and asks about a thing of other documents (`_thing`, with `holding`:
    `KnowledgeIndex.holding`): then it alone, among all. When the conversation has no sight: the newest question with
    the one before it, among all documents."""
    questions = [message["content"] for message in history if message["role"] == "user"]
    newest = questions[-1]
    sights = named(newest, names)
    if sights and not _BACK.search(newest):
        return Search(_searched(newest, names), _about(sights.values(), names))
    sight = None
    for earlier in questions[:-1]:
        sight = _sight_after(earlier, sight, names, holding)
    if sight is None:
        return Search("\n".join(_searched(question, names) for question in questions[-2:]), _about(sights.values(), names))
    if not sights and _thing(newest, sight, holding):
        return Search(_searched(newest, names))
    return Search("\n".join([_searched(newest, names), *sight.words]), sight.documents | _about(sights.values(), names))


def _searched(question: str, names: dict[str, tuple[str, ...]]) -> str:
    """A question as it is searched for: a Korean one with the Chinese words of its Korean ones (`terms.translated`)
    and the Chinese names of the sights it names, as no passage holds Korean."""
    if not _HANGUL.search(question):
        return question
    return " ".join([question, *translated(question), *(names[path][0] for path in named(question, names))])


@dataclass(frozen=True)
class Sight:
    """What a conversation is about: the names or things it was last asked by (`words`) and their `documents`."""

    words: tuple[str, ...]
    documents: frozenset[str]


def _sight_after(question: str, sight: Sight | None, names: dict[str, tuple[str, ...]], holding: Holding) -> Sight | None:
    """What a conversation about `sight` is about after `question`: the documents it names, else the thing of other
    documents it asks about (`_thing`), else `sight`."""
    if found := named(question, names):
        return Sight(tuple(found.values()), _about(found.values(), names))
    return (_thing(question, sight, holding) if sight else None) or sight


def _thing(question: str, sight: Sight, holding: Holding) -> Sight | None:
    """The thing of other documents than the `sight`'s a follow-up asks about ("關公獅係咩顏色？" after 六榕寺), with the
    documents that describe it, or None: a Chinese word of it of two characters or more that at most `FEW_HOLDERS`
    others hold and describe (`index.describes`), that names (`terms.names_a_thing`: not 好吃, 停车场) and that the
    sight's documents do not hold, while no word as rare is held by those ("摩天轮" of 广州塔). A follow-up that points
    back ("它", "there") asks about the sight."""
    if _BACK.search(question):
        return None
    words = [term for term in dict.fromkeys(terms(question))
             if HAN.fullmatch(term) and len(term) > 1 and term not in _GENERAL][:MAX_ASKED]  # a pasted text costs no more
    held = holding(words, rare=FEW_HOLDERS)
    rare = [word for word in words if 0 < len(held[word].by) <= FEW_HOLDERS]
    if any(held[word].by & sight.documents for word in rare):
        return None
    things = [word for word in rare if held[word].describing and names_a_thing(word)]
    return Sight(tuple(things), frozenset().union(*(held[word].describing for word in things))) if things else None


def _about(found: Iterable[str], names: dict[str, tuple[str, ...]]) -> frozenset[str]:
    """The documents one of whose names holds a name `found`: an operator's "沙面地图" is about 沙面 too."""
    patterns = [re.compile(rf"(?<![a-z]){re.escape(name)}(?![a-z])") for name in found]  # "canton" is not in "cantonese"
    return frozenset(path for path, aliases in names.items()
                     if any(pattern.search(plain) for plain in map(_name, aliases) if plain for pattern in patterns))


def in_english(question: str) -> bool:
    """Whether a question is asked in English: in Latin letters alone, or with English function words ("how", "is",
    "which"…) around Chinese names ("How tall is 广州塔?"). English names in a Chinese sentence ("Chen Clan Academy
    在哪个区？") leave it a Chinese question: the words that ask carry the language, not the names."""
    words = re.findall(r"[a-z]+", question.lower())
    return bool(words) and (not HAN.search(question) or any(word in ENGLISH_STOP for word in words))


def focused(found: list[Found], question: str) -> list[Found]:
    """The passages cut to the sentences that bear on the question (`_chosen`). The best passage is kept whole when
    none of its sentences does, the others are then left out. Passages within `FOCUS_ABOVE` characters are not cut."""
    kept = []
    for rank, passage in enumerate(found):
        chosen = _chosen(passage, question)
        if any(chosen) and len(passage.text) > FOCUS_ABOVE:
            kept.append(replace(passage, text="\n".join(line for line in chosen if line), whole=passage.text))
        elif any(chosen) or rank == 0:
            kept.append(passage)
    return kept


def _asked(passage: Found, question: str) -> list[str]:
    """What a question asks of a passage: its first `MAX_ASKED` search terms (a count, 几层, by its measure word, 层),
    the Chinese words for its English words (`terms.translated`) and the words a passage may say its Chinese ones with
    (`terms.said_otherwise`), less the words of the passage's document's names (a question about a sight names it, and
    so does every line of its entry), of the city's, those that point back at them ("那里", "it"), and a Japanese
    question's words in kana, which no passage holds."""
    aliases = [line for line in passage.text.split("\n") if ALIASES.match(line)]
    # A title with a colon names a topic, whose words count ("推荐路线：经典一日游": a question about a route asks for it).
    names = set(terms(" ".join([sight(passage.title), *aliases]))) | _NAMES
    words = [count[1] if (count := _COUNT_WORD.fullmatch(term)) else term
             for term in [*terms(question), *translated(question), *said_otherwise(question)]]
    return [term for term in dict.fromkeys(words)
            if term not in names and not _BACK.fullmatch(term) and not _KANA_ONLY.fullmatch(term)][:MAX_ASKED]


def _chosen(passage: Found, question: str) -> list[str]:
    """Each line of a passage, or the part of it that bears on the question: its sentences that hold a word the
    question asks (`_asked`), and the lines that a chosen sentence ending in a colon introduces; "" for the others."""
    asked = _asked(passage, question)
    chosen, introduced = [], False
    for line in passage.text.split("\n"):
        sentences = [] if ALIASES.match(line) else _SENTENCE.findall(line)
        picked = line if introduced and line.strip() else "".join(
            sentence for sentence, plain in zip(sentences, map(str.lower, map(simplified, sentences)))
            if any(term in plain for term in asked))
        introduced = (introduced and bool(line.strip())) or picked.rstrip().endswith(("：", ":"))
        chosen.append(picked)
    return chosen


def unanswered(found: list[Found], question: str) -> bool:
    """Whether a question asks something particular (not only "tell me about…") that no sentence of the passages
    found bears on, or none bears on what it asks for (`_focus`: "星火馆的馆长是谁？" finds 星火馆, not 馆长), a count or
    a year ("多少棵树？", "哪一年开通？") that none of those sentences gives in its measure word (outside their notes in
    brackets) nor lists ("几个门？": "南门、西门"), a time of day none gives as a clock time ("几点？"), a time taken none
    gives in minutes, hours, days or years ("坐多少分钟？"), a price none gives
    in yuan or as free, a size none gives in its unit ("多长？": 米, 公里), or a name it quotes that none of the passages
    holds ("“金记糖水”的招牌甜品是什么？"): the passages then likely do not answer it. A clause that leaves the answer to
    others ("门票和开放时间请以寺院公告为准") answers none of these. In a
    question not asked in English, an English word the glossary does not know is a name or a stray word, not something
    asked. A question worded like one of the names of the first passage's document that is itself a question is
    answered by it (`worded_like_a_name`)."""
    if not found or worded_like_a_name(found[0], question) or not _particular(_asked(found[0], question), question):
        return False
    chosen = "\n".join(line for passage in found for line in _chosen(passage, question) if line)
    plain = simplified(question)
    counted, quoted = _COUNTED.search(plain), _QUOTED.findall(plain)
    kept = "".join(clause for clause in _CLAUSE.findall(chosen) if not _DEFERS.search(clause))
    given = _NOTE.sub("", kept)
    if not chosen or counted and not re.search(rf"{_A_NUMBER}{counted[1] or '年'}", given) and not _listed(counted, plain, given):
        return True
    if _WHEN.search(plain) and not _CLOCK.search(kept):  # "高峰（约 8:00–9:30）": in brackets
        return True
    if _LASTING.search(plain) and not _DURATION.search(given):
        return True
    if _PRICE.search(plain) and not (IN_YUAN.search(given) or FREE_HELD.search(given)):
        return True
    if (size := _SIZE.search(plain)) and not re.search(rf"{_A_NUMBER}(?:{_SIZE_UNITS[(size[1] or size[2]).lower()]})", given):
        return True
    wanted = _focus(plain)
    answered_with = set(said_otherwise(wanted)) - set(terms(wanted))  # "多久": 小时, 天 are not what it asks for
    focus = [term for term in _particular(_asked(found[0], wanted), question) if term not in answered_with]
    if focus and not any(term in simplified(given).lower() for term in focus):
        return True
    texts = "".join(simplified(passage.whole or passage.text) for passage in found).replace(" ", "") if quoted else ""
    return any(name.replace(" ", "") not in texts for name in quoted)  # whole documents read only for a quoted name


def _listed(counted: re.Match, question: str, given: str) -> bool:
    """Whether `given` lists the things a count asks for ("几个门？": "南门、西门、北门"), each named with the word after
    the measure word."""
    thing = HAN.match(question, counted.end())
    return bool(thing) and bool(re.search(rf"{thing[0][0]}[、，和与及][^、，。\n]{{1,6}}{thing[0][0]}", given))


def _particular(asked: list[str], question: str) -> list[str]:
    """The words of `asked` that ask for something: not general ones, nor, in a question not asked in English, English
    words the glossary does not know."""
    return [term for term in asked if term not in _GENERAL
            and (in_english(question) or not re.fullmatch("[a-z]+", term) or term in GLOSSARY)]


def _focus(question: str) -> str:
    """The part of a question (in Simplified characters) that says what it asks for (`_FOCUS_EN`), or "", without the
    words that point ("那条河叫什么": 河) or ask for a name (`_NAMING`), which jieba would cut into the thing ("河叫")."""
    if "的" in question:
        return _POINTING.sub(" ", question.split("的", 1)[1])
    match = _FOCUS_EN.search(question)
    return (match[1] or match[2] or match[3]) if match else ""


def worded_like_a_name(passage: Found, question: str) -> bool:
    """Whether `question` is another wording of one of the passage's document's names that is a question of its own
    (`asks`): an operator's answer is an entry named by the question it answers and its wordings
    (`retrieval.library.entry`), and jieba cuts a new wording apart differently ("充电宝借吗": 充电, 宝借; "能存行李":
    能存), which no sentence holds, so the entry would look silent on what it was written to answer. Another wording:
    `SAME_WORDING` of the characters of its Chinese search terms (and of its other terms) are in the name's."""
    asked = _pieces(question)
    aliases = [match[1] for line in passage.text.split("\n") if (match := ALIASES.match(line))]
    names = [passage.title, *(name for line in aliases for name in re.split(r"[、；;,，]", line))]
    return bool(asked) and any(asks(name) and len(asked & _pieces(name)) >= SAME_WORDING * len(asked) for name in names)


def _pieces(text: str) -> set[str]:
    return {piece for term in set(terms(text)) - _GENERAL for piece in (term if HAN.fullmatch(term) else [term])}


def within(found: list[Found], budget: int, length: Callable[[str], int] = len) -> list[Found]:
    """The best passages whose texts together fit `budget`, as measured by `length` (the model's tokens in the app;
    characters by default): the best one always, cut to fit."""
    kept, used = [], 0
    sizes = [length(passage.text) for passage in found]
    for passage, size in zip(found, sizes):
        if used + size > budget:
            break
        kept.append(passage)
        used += size
    if found and not kept:
        best = found[0]
        kept = [replace(best, text=best.text[:len(best.text) * budget // sizes[0]], whole=best.whole or best.text)]
    return kept


def label(passage: Found) -> str:
    """How a passage is named to the visitor: its document's file name without extension, and its section. The name
    goes into the reply's Markdown: square brackets become full-width ones, so no name can form a link or an image."""
    name = f"{passage.name} · {passage.section}" if passage.section else passage.name
    return name.translate(_NO_LINKS)


def grounded(history: list[Message], found: list[Found]) -> list[Message]:
    """`history` with the newest question preceded by the passages (or by a line saying none was found), and a line
    saying so where no sentence of them bears on the question (`unanswered`)."""
    question = history[-1]
    if found:
        blocks = [f"[{number}] 《{passage.title}》{passage.section}\n{passage.text}" for number, passage in enumerate(found, 1)]
        context = _PASSAGES + "\n\n".join(blocks)
        context += f"\n\n{NOT_ANSWERED}" if unanswered(found, question["content"]) else ""
    else:
        context = NOTHING_FOUND
    language = f"\n{answer_in(question['content'])}".rstrip()
    return [*history[:-1], {"role": question["role"], "content": f"{context}\n\n{_QUESTION}{question['content']}{language}"}]


def answer_in(question: str) -> str:
    """What follows a question asked in Japanese, Korean or English: the language to answer in; nothing after one in
    Chinese."""
    if KANA.search(question):
        return IN_JAPANESE
    if _HANGUL.search(question):
        return IN_KOREAN
    return IN_ENGLISH if in_english(question) else ""


# A message that asks something: visitors' remarks ("广州塔真漂亮") are not questions the guide could fail to answer.
_ASKS = re.compile(r"[?？]|吗|么|呢|谁|哪|几|多[少高长远久大重深宽]|怎|咩|边|か|까|나요|\b(?:how|what|which|when|where|who|whose|why)\b",
                   re.IGNORECASE)
_CHECK_ELSEWHERE = {"zh": "建议向景区或官方渠道查询。", "en": "Please check with the site or its official channels.",
                    "ja": "現地の窓口や公式サイトでご確認ください。", "ko": "현장 안내소나 공식 채널에서 확인해 주세요."}


def asks(question: str) -> bool:
    """Whether a visitor's message asks a question (by its mark or its question words, in any script)."""
    return bool(_ASKS.search(simplified(question)))


def not_covered(question: str, found: list[Found]) -> str:
    """The reply to a question the passages found do not answer (`unanswered`), said in words in its language, with
    the entry that came closest: the demo models, given such passages, answer from what they say of something else."""
    closest = found[0].title.translate(_NO_LINKS)
    if KANA.search(question):
        return f"{NOT_COVERED_JA}（《{closest}》にも書かれていません）。{_CHECK_ELSEWHERE['ja']}"
    if _HANGUL.search(question):
        return f"{NOT_COVERED_KO}（《{closest}》에도 없습니다）. {_CHECK_ELSEWHERE['ko']}"
    if in_english(question):
        return f"{NOT_COVERED_EN}: the guide's entry 《{closest}》 does not say. {_CHECK_ELSEWHERE['en']}"
    return f"{NOT_COVERED}：导游资料《{closest}》里没有说到。{_CHECK_ELSEWHERE['zh']}"


_SILENT = "|".join(map(re.escape, (NOT_COVERED, NOT_COVERED_EN, NOT_COVERED_JA, NOT_COVERED_KO)))


def says_not_covered(reply: str) -> bool:
    """Whether a reply says the documents are silent (not where it quotes the rule that says to say so), in any
    script."""
    return any(re.search(f"(?<!“)({_SILENT})", text, re.IGNORECASE) for text in (reply, simplified(reply)))


_CLAIMS_SOURCE = re.compile(r"(?:根据|按照|依据)[^，。,\n]{0,6}资料|资料(?:中|里|上)?(?:显示|提到|记载|写明|说)|"
                            r"according to the (?:guide|passages?|sources?|references?|information)", re.IGNORECASE)


def claims_a_source(reply: str) -> str:
    """The words of a reply that say it answers from the sources ("根据【参考资料】", "according to the guide"), or
    nothing."""
    match = _CLAIMS_SOURCE.search(reply)
    return match.group(0) if match else ""


def drawn_on(found: list[Found], reply: str, question: str) -> list[Found]:
    """The passages a reply drew on: those it repeats the most of, and at least half as much as the best one,
    counting pairs of Chinese characters, words and numbers of two digits or more (a number counts twice) that the
    question did not already hold. None when it repeats nothing, or says the documents do not cover the question."""
    if says_not_covered(reply):
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
