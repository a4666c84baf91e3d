"""A reply in the visitor's script: a question in Traditional characters gets its reply converted as it streams, one
in Simplified or Japanese does not, and the model's thinking is left as it wrote it."""

from __future__ import annotations

import asyncio

import pytest

from chat.check import appended
from chat.script import in_script, in_traditional
from engine.api import Finished, ReplyStats, TextDelta
from retrieval.index import Found

pytestmark = pytest.mark.fast


def converted(question: str, deltas: list[TextDelta]) -> list[str]:
    async def events():
        for delta in deltas:
            yield delta
        yield Finished(ReplyStats(0))

    async def run() -> list[str]:
        return [event.text async for event in in_script(events(), question) if isinstance(event, TextDelta)]

    return asyncio.run(run())


def test_a_traditional_question_gets_its_reply_in_traditional_characters_as_it_streams():
    deltas = [TextDelta("陈家祠的门票", ReplyStats(0)), TextDelta("是10元，位于荔湾区。", ReplyStats(0)),
              TextDelta("这是思考", ReplyStats(0), kind="thinking")]
    assert converted("陳家祠嘅門票幾多錢？", deltas) == ["陳家祠的門票", "是10元，位於荔灣區。", "这是思考"]
    assert converted("白雲山最高峰叫什麼？", [TextDelta("最高峰在里面", ReplyStats(0))]) == ["最高峰在裡面"]  # Taiwan's
    assert converted("白雲山最高峰叫咩名？", [TextDelta("最高峰在里面", ReplyStats(0))]) == ["最高峯在裏面"]  # Hong Kong's
    assert converted("陈家祠的门票多少钱？", deltas) == ["陈家祠的门票", "是10元，位于荔湾区。", "这是思考"]
    assert in_traditional("黃埔軍校係邊一年成立嘅？") and not in_traditional("黄埔军校是哪一年成立的？")
    assert not in_traditional("広東省博物館は何曜日が休館ですか？") and not in_traditional("How tall is it?")


def test_a_reply_in_traditional_characters_is_checked_against_simplified_sources():
    found = [Found("k/陈家祠.md", "陈家祠", "开放时间与门票", "陈家祠门票为 10 元，位于荔湾区。", 1.0,
                   document="陈家祠门票为 10 元，位于荔湾区。")]
    lines, used, missing = appended("陳家祠門票為 10 元，位於荔灣區。", found, "陳家祠門票幾多錢？", frozenset({"荔湾区"}))
    assert used == found and missing == []
    assert appended("陳家祠位於天河區。", found, "陳家祠喺邊個區？", frozenset({"荔湾区", "天河区"}))[2] == ["天河区"]
