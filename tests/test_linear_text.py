"""Every text function that a reply, a question or a document goes through takes time in proportion to its input:
fed a hostile shape of text four times longer, none takes much more than four times as long (a regular expression
that backtracks takes sixteen or sixty-four times as long, and stalls every chat while it runs on the event loop)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chat.check import appended, check_table
from history.conversation import model_text
from history.export import quoted
from insights.unanswered import search_terms
from retrieval.checking import claims, unsupported
from retrieval.grounding import claims_a_source, drawn_on, focused, grounded, in_english, named, says_not_covered
from retrieval.index import Found
from retrieval.passages import passages
from retrieval.places import places
from retrieval.reading import UnreadableError, read_document
from retrieval.terms import terms
from ui.read_aloud import speech

pytestmark = pytest.mark.fast

# Each shape as a function of n: about 10,000 blank lines, runs of spaces, pipes, dashes and brackets at n = 10,000.
SHAPES: dict[str, Callable[[int], str]] = {
    "blank lines": lambda n: "答\n" + "\n" * n + "完",
    "lines of spaces": lambda n: ("x" + " " * 100 + "\n") * (n // 100),
    "spaces then a mark": lambda n: "#" + " " * n + "x #",
    "pipes and dashes": lambda n: ("|" + " " * 8 + ":---" + "\n" + "| " * 4 + "\n") * (n // 20),
    "open brackets": lambda n: "[" * n,
    "image openers": lambda n: "![" * (n // 2) + "](http://192.0.2.7/x.png)",
    "numbers": lambda n: " ".join(str(number) for number in range(n // 5)) + " 米",
    "list numbers": lambda n: "\n".join(f"{number}. 第{number}站" for number in range(n // 8)),
    "place fields": lambda n: "- 所在区：" + "海珠区、" * (n // 4) + "\n- 最近地铁站：" + "区" * n,
}


def _passage(text: str) -> Found:
    return Found("/guide/广州塔.md", "广州塔", "简介", text, 1.0, document=text)


KNOWN = frozenset({"海珠区", "天河区", "广州塔站", "广州塔", "陈家祠"})  # places a guide knows
NAMES = {"/guide/广州塔.md": ("广州塔", "Canton Tower", "小蛮腰"), "/guide/陈家祠.md": ("陈家祠", "Chen Clan Academy")}


_FOLDER: list[Path] = []  # a scratch folder for documents, set by the fixture below


def _read(suffix: str, wrap: str = "{}") -> Callable[[str], object]:
    def read(text: str) -> object:
        path = _FOLDER[0] / f"doc{suffix}"
        path.write_text(wrap.format(text), encoding="utf-8")
        try:
            return passages(read_document(path))
        except UnreadableError as error:  # a document of no words is skipped: an answer too
            return error
    return read


FUNCTIONS: dict[str, Callable[[str], object]] = {
    "read aloud": speech,
    "claims": claims,
    "unsupported": lambda text: unsupported(text, [_passage(text)], [_passage(text)], text, KNOWN),
    "drawn on": lambda text: drawn_on([_passage(text)], text, text),
    "says not covered": says_not_covered,
    "claims a source": claims_a_source,
    "in English": in_english,
    "focused": lambda text: focused([_passage(text * 2)], text),
    "grounded": lambda text: grounded([{"role": "user", "content": text}], [_passage(text)]),
    "sources and marks": lambda text: appended(text, [_passage(text)], text),
    "check table": lambda text: check_table(text, [_passage(text)], [_passage(text)], KNOWN),
    "places": places,
    "names": lambda text: named(text, NAMES),
    "search terms": terms,
    "operator's grouping terms": search_terms,
    "model text": model_text,
    "export quote": quoted,
    "Markdown document": _read(".md"),
    "text document": _read(".txt"),
    "HTML document": _read(".html", "<html><body><h1>{0}</h1><p>{0}</p><table><tr><td>{0}</td></tr></table>"),
}


def _seconds(function: Callable[[str], object], text: str) -> float:
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        function(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.fixture(scope="module", autouse=True)
def scratch_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    _FOLDER[:] = [tmp_path_factory.mktemp("documents")]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_time_grows_with_the_input_not_faster(name: str, shape: str):
    function, make = FUNCTIONS[name], SHAPES[shape]
    short, long = _seconds(function, make(2_500)), _seconds(function, make(10_000))
    assert long < 10 * short + 0.05, f"{name} on {shape}: {short:.3f} s, four times longer {long:.3f} s"
    assert long < 2.0, f"{name} on {shape} of some 10,000 characters took {long:.1f} s"


def test_a_reply_of_3000_blank_lines_or_of_long_blank_lines_is_speech_within_a_fifth_of_a_second():
    for reply in ("好的" + "\n" * 3000 + "完", ("\n" + " " * 100) * 200):
        assert _seconds(speech, reply) < 0.2
