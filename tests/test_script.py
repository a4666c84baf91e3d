"""A reply in the visitor's script: a question in Traditional characters gets its reply converted as it streams, one
in Simplified or Japanese does not, and the model's thinking is left as it wrote it. A question in written Cantonese
is shown to the model in Mandarin's words."""

from __future__ import annotations

import asyncio

import pytest

from chat.check import appended
from chat.script import in_script
from config.cantonese import as_the_model_reads, in_mandarin
from config.writing import in_traditional
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


@pytest.mark.parametrize(("question", "shown"), [
    ("北京路步行街使唔使買門票？", "北京路步行街需不需要买门票？"),
    ("沙面有幾大？", "沙面有多大？"),  # no marker of Cantonese but its word
    ("白切雞一般點醬食？", "白切鸡一般点酱吃？"),  # 點 is "dip" here, 食 "eat"
    ("華南植物園係邊個創建嘅？", "华南植物园是谁创建的？"),  # 邊個 is "who" before a verb
    ("陳家祠喺邊個區？", "陈家祠在哪个区？"),  # and "which" before a noun
    ("廣州有幾多個區？", "广州有多少个区？"),
    ("陈家祠嘅门票几多钱？", "陈家祠的门票多少钱？"),  # Cantonese in Simplified characters
    ("六榕寺个花塔有几多层？", "六榕寺个花塔有多少层？"),  # and asked with its words alone
    ("沒關係，佢幾點開門？", "没关系，它几点开门？"),  # 關係 and 幾點 keep their meaning
    ("白雲山嘅纜車幾錢一位？", "白云山的缆车多少钱一位？"),  # 幾錢: how much money
])
def test_a_question_in_written_cantonese_is_shown_to_the_model_in_mandarins_words(question, shown):
    assert in_mandarin(question) == shown


@pytest.mark.parametrize("question", ["廣東省博物館星期幾閉館？", "旁邊一個商場叫什麼？", "幾點去比較好？", "陈家祠门票多少钱？",
                                      "How tall is the tower?", "広州タワーの高さは？"])
def test_a_question_in_mandarin_or_another_language_is_shown_as_it_was_asked(question):
    assert in_mandarin(question) == question


def test_only_the_visitors_questions_are_rewritten_for_the_model():
    history = [{"role": "user", "content": "沙面喺邊度？"}, {"role": "assistant", "content": "沙面喺荔灣區。"},
               {"role": "user", "content": "佢有咩睇？"}]
    assert as_the_model_reads(history) == [{"role": "user", "content": "沙面在哪里？"}, history[1],
                                           {"role": "user", "content": "它有什么看？"}]
