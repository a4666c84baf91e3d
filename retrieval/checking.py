"""A grounded reply checked against what it was given: the figures it states (heights, years, dates, times, prices,
phone numbers, distances: every number written in digits, with its unit), the names it quotes (《…》, “…”) and the
places the knowledge base knows that it names (`retrieval.places`: districts, metro stations, the documents' sights), each
looked for in the whole documents of the passages it drew on, the passages it was given, and the question. A right
figure that the sentences given leave out but their document holds is not flagged; "天河区" where the document says
海珠区 is. Whether a visit costs is checked too: a reply that says a ticket must be bought is held only where the sources
speak of a price or of buying one (a museum the guide says is free is not), and one that says it is free only where they
say so.

A figure that contradicts its passage ("384 米" where the passage says 600 米) is not found there; nor is a figure the
passages never mention. A clock time, a price, a length, a year, a floor, a metro line and a stretch of minutes or
hours are held only by a number of the same kind (`measures`): "下午4点" is not held by the 四 of "五分之四", nor
"600 元" by "600 米"; "10点" is held by "22:00". Neither is corrected (a passage may hold several figures of one unit,
and only the model knows which it meant): both are shown to the visitor as not in the sources (`unsupported`). Numbers
written in words ("六百米") and names not quoted are not checked.
"""

from __future__ import annotations

import re

from retrieval.index import Found

_FIGURE = re.compile(r"(?<![A-Za-z0-9.,])(\d+(?:[,.]\d+)*(?:[-–~:]\d+(?:[,.]\d+)*)*)(\s*(?:平方米|平方公里|公里|千米|米|"
                     r"公顷|年代|年|月|日|号线|号|元|块|分钟|小时|点|层|万|亿|岁|%|km|m\b|meters?\b|metres?\b|feet\b|"
                     r"ft\b|yuan\b|rmb\b|minutes?\b|hours?\b))?", re.IGNORECASE)
_LIST_NUMBER = re.compile(r"^[ \t]*\d+[.、)]\s", re.MULTILINE)  # "1. " starting a line numbers a list: not a figure
_QUOTED = re.compile(r"《([^》\n]{2,20})》|“([^”\n]{2,12})”")
_DIGITS = {character: value for value, character in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10_000}
_CHINESE_NUMBER = re.compile(f"[{''.join(_DIGITS)}{''.join(_UNITS)}]+")
# A visit that costs, or not, as a reply says it and as a source does.
_PAID = re.compile(r"(?:需要|须|需|要|得)(?:先|提前)?(?:购买|买|购)(?:门)?票|(?:需要|要)?收费|"
                   r"(?:need|have) to (?:buy|pay for) (?:a |an )?(?:ticket|admission)|(?:requires?|needs?) an? "
                   r"(?:admission )?ticket|not free", re.IGNORECASE)
_FREE = re.compile(r"免费|free (?:of charge|admission|entry|to (?:enter|visit))|(?:admission|entry|entrance) is free|"
                   r"is free to (?:enter|visit)", re.IGNORECASE)
FREE_HELD = re.compile(r"免费|免票|免门票|不收(?:费|门票)|无需门票|不(?:需要|用|要)门票|\bfree\b", re.IGNORECASE)  # a source saying so
_NOT_BEFORE = re.compile(r"(?:不|无|免|勿|不用|没有|not |n't |no |without )$", re.IGNORECASE)
# The kind of a figure by its unit: a figure of one of these kinds is held only by a number of the same kind.
_KINDS = {"点": "clock", "元": "price", "块": "price", "yuan": "price", "rmb": "price", "米": "length", "千米": "length",
          "公里": "length", "km": "length", "m": "length", "meter": "length", "metre": "length", "ft": "length",
          "feet": "length", "年": "year", "层": "floor", "号线": "line", "分钟": "duration", "小时": "duration",
          "minute": "duration", "hour": "duration"}
# A figure as a source may also write it: in Chinese numerals, with words between, or several before one unit ("两个
# 小时", "1 个多小时", "四点", "3、7 号线").
_NUMBER = r"\d+(?:\.\d+)?|[零一二三四五六七八九十百千万两〇]+"
_BETWEEN = re.compile(r"\s*[、,，/~–和或与及至到-]\s*")
_LOOSE_MEASURE = re.compile(rf"((?:(?:{_NUMBER}){_BETWEEN.pattern})*(?:{_NUMBER}))\s*(?:[个多余来]\s*){{0,2}}"
                            f"({'|'.join(sorted((unit for unit in _KINDS if not unit.isascii()), key=len, reverse=True))})")
IN_YUAN = re.compile(r"\d+(?:\.\d+)?\s*(?:元|块|yuan|rmb)", re.IGNORECASE)  # a price given
_PRICED = re.compile(rf"{IN_YUAN.pattern}|收费|售票|购票|票价|门票\d", re.IGNORECASE)


def numbers(text: str) -> set[str]:
    """Every number written in digits in `text` (each end of a range, each part of a phone number, a time as one, a
    time on the hour as its hour: "22:00" is 22 点), as a plain string ("2,000" and "2000" alike); zero left out."""
    found = {_plain(part) for match in _FIGURE.finditer(text) for part in re.split("[-–~]", match.group(1))}
    return {number.removesuffix(":00") for number in found} - {"0"}


def claims(reply: str, known: frozenset[str] = frozenset()) -> list[str]:
    """The figures, quoted names and `known` places of a reply, each once, as it writes them (a place inside a longer
    one it names counts as the longer: 广州塔站 is not 广州塔)."""
    found = [match.group(0).strip() for match in _FIGURE.finditer(_LIST_NUMBER.sub("", reply)) if numbers(match.group(1))]
    found += [match.group(1) or match.group(2) for match in _QUOTED.finditer(reply)]
    named = [place for place in known if place in reply]
    found += [place for place in named if not any(place != other and place in other for other in named)]
    found += [match.group(0) for pattern in (_PAID, _FREE) for match in pattern.finditer(reply)
              if not _NOT_BEFORE.search(reply[max(0, match.start() - 8):match.start()])]
    return list(dict.fromkeys(found))


def chinese_numbers(text: str) -> set[str]:
    """The numbers `text` writes in Chinese numerals (二月十一至十三日: 2, 11, 13; 一百多座: 100; 二〇一〇: 2010), as
    plain strings, zero left out."""
    found = set()
    for run in _CHINESE_NUMBER.findall(text):
        if not set(run) & set(_UNITS):  # digit by digit, as a year is written
            found.add(str(int("".join(str(_DIGITS[character]) for character in run))))
            continue
        total = section = digit = 0
        for character in run:
            if character in _DIGITS:
                digit = _DIGITS[character]
            elif character == "万":
                total, section, digit = total + (section + digit) * 10_000, 0, 0
            else:
                section, digit = section + (digit or 1) * _UNITS[character], 0
        found.add(str(total + section + digit))
    return found - {"0"}


def measures(text: str, in_a_source: bool = False) -> set[tuple[str, str]]:
    """The figures of `text` whose unit gives their kind (`_KINDS`; a time written "9:30" is a clock time), each as
    (kind, number), a clock time as its hour. `in_a_source`: also as a source may write them (`_LOOSE_MEASURE`), and
    an hour also as the other half of the day's ("22:00" holds 10 点, "四点" holds 16:00)."""
    found = set()
    for match in _FIGURE.finditer(text):
        unit = (match.group(2) or "").strip().lower()
        kind = _KINDS.get(unit) or _KINDS.get(unit.removesuffix("s"))
        for part in re.split("[-–~]", match.group(1)):
            if ":" in part:
                found.add(("clock", _plain(part.split(":")[0])))
            elif kind:
                found.add((kind, _plain(part)))
    if in_a_source:
        found |= {(_KINDS[unit], number) for written, unit in _LOOSE_MEASURE.findall(text)
                  for run in _BETWEEN.split(written) if run
                  for number in ({_plain(run)} if run[0].isdigit() else chinese_numbers(run))}
        found |= {("clock", str(int(hour) + (12 if int(hour) <= 12 else -12))) for kind, hour in set(found)
                  if kind == "clock" and hour.isdigit()}
    return found


class Holder:
    """A text read once, to look up many claims in: every number of a figure (in digits or Chinese numerals: a reply
    may write 11 where its document wrote 十一, but the 九 of 上下九步行街, one of the `names` given, is no figure), or a
    quoted name (spaces aside)."""

    def __init__(self, text: str, names: frozenset[str] = frozenset()) -> None:
        unnamed = re.sub("|".join(map(re.escape, sorted(names, key=len, reverse=True))), " ", text) if names else text
        self.numbers = numbers(text) | chinese_numbers(unnamed)
        self.measures = measures(unnamed, in_a_source=True)
        self.compact = "".join(text.split())

    def holds(self, claim: str) -> bool:
        if _PAID.fullmatch(claim):
            return bool(_PRICED.search(self.compact))
        if _FREE.fullmatch(claim):
            return bool(FREE_HELD.search(self.compact))
        if wanted := numbers(claim):
            kinds = measures(claim)
            return kinds <= self.measures and wanted - {number for _, number in kinds} <= self.numbers
        return "".join(claim.split()) in self.compact


def holds(text: str, claim: str) -> bool:
    """Whether `text` holds a claim (`Holder`)."""
    return Holder(text).holds(claim)


def source_text(passage: Found) -> str:
    return f"{passage.title} {passage.section}\n{passage.whole or passage.text}"


def unsupported(reply: str, given: list[Found], used: list[Found], question: str,
                known: frozenset[str] = frozenset()) -> list[str]:
    """The claims of `reply` (`known`: the places to check) that neither the whole documents of the passages it drew
    on (`used`), nor the passages it was given, nor the question hold; a place, that neither those documents nor the
    question hold (a station of another sight's passage is not this one's)."""
    documents = "\n".join([*dict.fromkeys(passage.document for passage in used), question])
    cited, sources = Holder(documents, known), Holder("\n".join([documents, *map(source_text, given)]), known)
    return [claim for claim in claims(reply, known) if not (cited if claim in known else sources).holds(claim)]


def _plain(number: str) -> str:
    if ":" in number:
        return ":".join(part.zfill(2) if index else part.lstrip("0") or "0" for index, part in enumerate(number.split(":")))
    plain = number.replace(",", "")
    return plain.rstrip("0").rstrip(".") if "." in plain else plain.lstrip("0") or "0"
