"""The knowledge benchmark's scoring (`bench.knowledge_scoring`) and its large document, on replies written here: a
right answer, an honest one, a figure no cited document holds; the halves split by entry; false flags and unmarked
wrong answers counted."""

import pytest

from history.conversation import SOURCES_MARK, UNCHECKED, UNSUPPORTED_MARK

pytestmark = pytest.mark.fast


def test_the_knowledge_benchmark_scores_answers_and_builds_its_large_document(tmp_path):
    from bench.knowledge import scale
    from bench.knowledge_scoring import honest, load_questions, outside_source, parse, right

    questions = load_questions()
    assert len(questions["guide"]) >= 80 and len(questions["handbook"]) >= 20 and len(questions["uncovered"]) >= 20
    assert len(questions["english"]) >= 40 and len(questions["mixed"]) >= 15
    page = "It is 384 m tall, built in 2010." + SOURCES_MARK + "广州塔 · 简介、历史" + UNSUPPORTED_MARK + "384 m"
    reply = parse(page) | {"question": "How tall is the Canton Tower?"}
    assert reply["answer"] == "It is 384 m tall, built in 2010." and reply["sources"] == ["广州塔"]
    assert reply["not_in_sources"] == ["384 m"] and outside_source(reply) == ["384 m"]  # 2010 is in the entry
    assert parse("它由某公司制造。" + UNCHECKED) == {"answer": "它由某公司制造。", "sources": [], "not_in_sources": [],
                                                 "unchecked": True}
    assert honest("The guide has no information on this.")
    assert right("总高度 600 米", [["600"]]) and right("在 D栋 地下", [["D 栋"]]) and not right("454 米", [["600"]])
    assert right("虾饺、烧卖", [["虾饺"], ["烧卖"]]) and not right("虾饺", [["虾饺"], ["烧卖"]])
    assert honest("资料里没有这方面的信息。") and not honest("广州塔的电梯由某公司生产。")
    assert honest("資料裡沒有這方面的信息。") and honest("ガイドの資料にはこの情報がありません。")  # every script
    figures = scale([item["question"] for item in questions["guide"][:10]], tmp_path, count=200)
    assert figures["passages"] == 200 and 0 < figures["search_ms_p50"] <= figures["search_ms_p95"]


def test_the_knowledge_benchmark_splits_by_entry_and_counts_false_flags_and_unmarked_wrongs():
    from bench.knowledge_scoring import COVERED, HALVES, half, in_their_language, load_questions, parse, summary, turns

    questions = load_questions()
    for kind, items in questions.items():  # every kind in both halves
        assert {half(item) for item in items} == set(HALVES), kind
    assert all(len(turns(item)) >= 2 for item in questions["conversation"])
    assert half({"source": "广州塔"}) == half({"question": "?", "entry": "广州塔"})  # by entry, not by question
    assert in_their_language("広州タワーの高さは？", "高さは600メートルです") and not in_their_language("広州タワー？", "600米")
    assert in_their_language("광저우 타워?", "600미터입니다") and in_their_language("How tall?", "600 m")

    def asked(kind: str, keys: list, page: str) -> tuple[str, dict, dict]:
        return kind, {"question": "问", "keys": keys, "source": "广州塔"}, parse(page) | {"question": "问"}

    figures = summary([
        asked("guide", [["600"]], "600 米。" + SOURCES_MARK + "广州塔 · 简介" + UNSUPPORTED_MARK + "600 米"),  # flagged
        asked("guide", [["600"]], "600 米。" + SOURCES_MARK + "广州塔 · 简介"),
        asked("english", [["600"]], "384 m." + SOURCES_MARK + "广州塔 · 简介"),  # wrong, unmarked
        asked("english", [["600"]], "384 m." + UNCHECKED),  # wrong, marked
        asked("uncovered", [], "资料里没有这方面的信息。"), asked("uncovered", [], "大约十五分钟。" + UNCHECKED)])
    assert figures["right_flagged"] == 0.5 and figures["wrong_unmarked"] == 0.5
    assert figures["uncovered_said"] == 0.5 and figures["uncovered_said_or_marked"] == 1.0
    assert figures["guide_right"] == 1.0 and figures["english_right"] == 0.0 and figures["traditional_right"] is None
    assert set(COVERED) >= {"conversation", "traditional", "visitors"}
