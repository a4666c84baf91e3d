"""The knowledge base without the app: each format read into sections, passages cut to size under their headings,
Chinese-aware BM25 search over a real SQLite file, files added, changed, removed and unreadable, and what the
prompt gets (the follow-up's search text, the passages within their budget, which passages a reply drew on)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import docx
import pytest

from chat.check import appended, stored
from chat.script import in_their_script
from history.conversation import UNSUPPORTED_MARK
from retrieval.grounding import (
    IN_ENGLISH,
    IN_JAPANESE,
    IN_KOREAN,
    MAX_ASKED,
    NOT_ANSWERED,
    RULES,
    asks,
    drawn_on,
    focused,
    grounded,
    not_covered,
    says_not_covered,
    search_for,
    unanswered,
    within,
)
from retrieval.index import Found, Held, KnowledgeIndex, describes
from retrieval.library import entry
from retrieval.passages import MAX_CHARS, passages
from retrieval.reading import Document, UnreadableError, read_document
from retrieval.terms import names_a_thing, romanized, terms, translated
from tests.support import GUIDE, pdf_with_text

pytestmark = pytest.mark.fast


def test_every_format_is_read_into_its_title_and_sections(tmp_path):
    (tmp_path / "guide.md").write_text("# 指南\n\n开头。\n\n## 开放时间\n\n九点开门。\n\n## 来源\n\n某网站\n",
                                       encoding="utf-8")
    (tmp_path / "notes.txt").write_text("第一段。\n\n第二段。".encode("gb18030").decode("gb18030"), encoding="gb18030")
    (tmp_path / "page.html").write_text("<html><head><title>页面</title><script>x=1</script></head><body><h2>门票"
                                        "</h2><p>十元。</p><ul><li>学生<b>免票</b></li></ul></body></html>",
                                        encoding="utf-8")
    word = docx.Document()
    word.add_heading("手册", level=1)
    word.add_paragraph("欢迎光临。")
    word.add_heading("停车", level=2)
    word.add_paragraph("停车场在地下二层。")
    word.save(tmp_path / "manual.docx")
    pdf_with_text(tmp_path / "leaflet.pdf", ["Opening hours: 9:30 to 17:00", "Closed on Mondays"])

    assert read_document(tmp_path / "guide.md").title == "指南"
    assert dict(read_document(tmp_path / "guide.md").sections) == {"": "开头。", "开放时间": "九点开门。",
                                                                   "来源": "某网站"}
    assert read_document(tmp_path / "notes.txt").title == "notes"  # GBK text, named by its file
    assert read_document(tmp_path / "notes.txt").sections == (("", "第一段。\n\n第二段。"),)
    html = read_document(tmp_path / "page.html")
    assert html.title == "页面" and html.sections == (("门票", "十元。\n\n学生免票"),)
    manual = read_document(tmp_path / "manual.docx")
    assert manual.title == "手册" and dict(manual.sections) == {"手册": "欢迎光临。", "停车": "停车场在地下二层。"}
    leaflet = read_document(tmp_path / "leaflet.pdf")
    assert leaflet.sections[0][0].startswith("第 1 页") and "Closed on Mondays" in leaflet.sections[0][1]


def test_a_file_that_cannot_be_read_says_why(tmp_path):
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    (tmp_path / "empty.md").write_text("# 只有标题\n", encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(bytes(range(128, 256)) * 4)
    for name in ("broken.pdf", "empty.md", "binary.txt"):
        with pytest.raises(UnreadableError) as raised:
            read_document(tmp_path / name)
        assert str(raised.value)


def test_passages_keep_short_sections_together_and_cut_long_ones_under_their_heading():
    document = read_document(GUIDE / "广州塔.md")
    cut = passages(document)
    assert all(len(passage.text) <= MAX_CHARS + 40 for passage in cut)  # + the headings' own lines
    assert not any("来源" in passage.section.split("、") for passage in cut)  # a list of sources is not a passage
    assert cut[0].title == "广州塔" and cut[0].section.startswith("简介") and "600 米" in cut[0].text
    long = passages(Document("长文", (("第一章", "句子。" * 400),)))
    assert len(long) == 3 and all(passage.section == "第一章" and passage.text.endswith("。") for passage in long)


@pytest.mark.parametrize(("question", "document"), [
    ("广州塔有多高？", "广州塔"), ("陈家祠的门票多少钱", "陈家祠"), ("早茶的四大天王是哪几样", "早茶点心"),
    ("为什么广州又叫羊城", "五羊传说与城市别称"), ("从白云机场怎么去市区", "机场与火车站"),
])
def test_search_finds_the_document_a_chinese_question_is_about(index, question, document):
    search = search_for(conversation(question), index.names([GUIDE]), holding(index, GUIDE))  # as the app searches
    assert index.search(search.text, [GUIDE], 3, search.documents)[0].name == document


def conversation(*questions: str) -> list[dict]:
    return [{"role": role, "content": text} for question in questions
            for role, text in (("user", question), ("assistant", "……"))][:-1]


def holding(index: KnowledgeIndex, *folders: Path):
    return partial(index.holding, folders=folders)


@pytest.mark.parametrize(("questions", "document"), [
    (("介绍一下陈家祠", "它几点开门？"), "陈家祠"),  # names none: the conversation's sight
    (("陈家祠的门票多少钱？", "How tall is the Canton Tower?"), "广州塔"),  # a new sight, another language
    (("陈家祠的门票多少钱？", "广州塔在哪个区？"), "广州塔"),
    (("How tall is the Canton Tower?", "Which metro station is nearest to it?"), "广州塔"),  # points back
    (("白云山有多高？", "陳家祠門票幾多錢？", "佢喺邊個區？"), "陈家祠"),  # Traditional and Cantonese, then back
    (("沙面以前是哪两个国家的租界？", "门票要钱吗？"), "沙面"),
    (("沙面以前是哪两个国家的租界？", "需要预约吗？"), "沙面"), (("白云山有多高？", "缆车票多少钱？"), "白云山"),
    (("沙面以前是哪两个国家的租界？", "有什么传说？"), "沙面"), (("六榕寺是哪一年建的？", "有什么好吃的？"), "六榕寺"),
    # names none, but a thing of another entry
    (("六榕寺是哪一年建的？", "關公獅係咩顏色？"), "醒狮"), (("陈家祠的门票多少钱？", "虾饺的皮是用什么做的？"), "早茶点心"),
    (("六榕寺是哪一年建的？", "關公獅係咩顏色？", "佢有咩寓意？"), "醒狮"),  # then the thing is the sight
    (("陈家祠的门票多少钱？", "虾饺的皮是用什么做的？", "它要捏几道褶？"), "早茶点心"),
])
def test_each_question_searches_for_its_own_sight_or_carries_the_conversations(index, questions, document):
    search = search_for(conversation(*questions), index.names([GUIDE]), holding(index, GUIDE))
    assert index.search(search.text, [GUIDE], 1, search.documents)[0].name == document, search


def test_a_pasted_text_as_a_follow_up_looks_up_no_more_words_than_a_question():
    looked_up = []

    def holding(words, rare):
        looked_up.append(len(words))
        return {word: Held(frozenset(), frozenset()) for word in words}

    guide = "".join(path.read_text(encoding="utf-8") for path in sorted(GUIDE.glob("*.md")))
    pasted = re.sub("陈家祠|[它这那]", "", guide)[:4000]  # names no sight, points back at none
    search_for(conversation("介绍一下陈家祠", pasted), {"陈家祠.md": ("陈家祠",)}, holding)
    assert looked_up and max(looked_up) <= MAX_ASKED


def test_a_thing_is_told_from_what_anyone_may_ask_of_a_sight_and_from_how_a_document_gives_it():
    assert all(map(names_a_thing, ["虾饺", "双皮奶", "关公", "木棉花"]))
    assert not any(map(names_a_thing, ["好吃", "传说", "停车场", "拍照", "闭馆", "门票"]))
    assert describes("虾饺", "早茶点心", "dim sum", "- 虾饺：澄面做的半透明外皮。")
    assert describes("关公", "醒狮", "lion dance", "刘备狮（黄色）、关公狮（红色）。")
    assert describes("木棉花", "木棉花：广州的市花", "kapok", "木棉一般在三月开放。")
    assert not describes("餐厅", "沙面", "Shamian", "岛上有不少咖啡馆和西餐厅。")


def test_an_operators_document_named_after_a_sight_is_searched_with_it(index, tmp_path):
    folder = tmp_path / "operators"
    folder.mkdir()
    (folder / "沙面地图.md").write_text("# 沙面地图\n\n沙面的码头在沙面南边，渡轮每 20 分钟一班。\n", encoding="utf-8")
    index.sync(folder)
    search = search_for(conversation("沙面的码头在哪里？"), index.names([GUIDE, folder]), holding(index, GUIDE, folder))
    assert index.search(search.text, [GUIDE, folder], 1, search.documents)[0].name == "沙面地图"


@pytest.mark.parametrize(("question", "document"), [
    ("陳家祠門票幾多錢？", "陈家祠"), ("黃埔軍校係邊一年成立嘅？", "黄埔军校旧址"), ("白雲山最高峰叫咩名？", "白云山"),
    ("廣州塔喺邊個區？", "广州塔"), ("沙面點樣去？", "沙面"),
])
def test_traditional_and_cantonese_questions_find_what_simplified_ones_do(index, question, document):
    search = search_for(conversation(question), index.names([GUIDE]), holding(index, GUIDE))
    assert index.search(search.text, [GUIDE], 1, search.documents)[0].name == document



@pytest.mark.parametrize(("question", "document", "says"), [
    ("광저우 타워의 높이는 몇 미터입니까?", "广州塔", "600 米"), ("바이윈산의 최고봉은 어디입니까?", "白云山", "摩星岭"),
    ("진씨서원 입장료는 얼마예요?", "陈家祠", "10 元"), ("사몐에 가려면 지하철 어느 역에서 내려요?", "沙面", "黄沙站"),
    ("광저우타워는 몇 시에 문을 닫아요?", "广州塔", "22 点"),  # spaced otherwise
])
def test_a_korean_question_finds_its_entry_by_its_korean_name_and_the_sentence_that_answers(index, question, document,
                                                                                            says):
    # Korean by pairs of syllables: a name's pairs whatever particle follows it (타워의, 바이윈산의); its question words
    # by the glossary's Korean (높이 → 高, 입장료 → 门票, 역 → 站)
    assert {"광저", "저우", "타워"} <= set(terms("광저우 타워의 높이")) and "워의" in terms("광저우 타워의 높이")
    search = search_for(conversation(question), index.names([GUIDE]), holding(index, GUIDE))
    found = index.search(search.text, [GUIDE], 2, search.documents)
    assert found[0].name == document
    assert any(says in passage.text for passage in focused(found, question))
    assert len("".join(passage.text for passage in focused(found, question))) < len("".join(p.text for p in found))

def test_a_document_in_traditional_characters_is_found_by_a_simplified_question(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "園區.md").write_text("# 訪客須知\n\n停車場在東門，每小時收費 5 元。\n", encoding="utf-8")
    index = KnowledgeIndex(tmp_path / "index.db")
    index.sync(folder)
    assert index.search("停车场在哪里？", [folder], 1)[0].name == "園區"


@pytest.mark.parametrize(("questions", "expected"), [
    (("How long is the queue at the Canton Tower right now?",), True), (("广州塔的电梯是哪家公司生产的？",), True),
    (("广州塔有多高？",), False), (("介绍一下广州塔",), False), (("Tell me about the Canton Tower",), False),
    (("广州塔有多高？", "它几点关门？"), False), (("沙面岛上一共有多少棵树？",), True), (("广州一共有多少个区？",), False),
    (("沙面島上一共有幾多棵樹？",), True), (("长隆野生动物世界有几只考拉？",), True),
    (("陈家祠对面那家“金记糖水”的招牌甜品是什么？",), True), (("石室圣心大教堂为什么叫“石室”？",), False),
    (("白云山索道是哪一年开通的？",), True), (("海珠桥是哪一年建成的？",), False), (("广州动物园在哪？谢谢 please",), False),
    # what a question asks for, not only what it is about, is found in a sentence
    (("十三行博物馆的馆长是谁？",), True), (("How many people visited Shamian Island last weekend?",), True),
    (("陈家祠的门票多少钱？",), False), (("What is the height of the Canton Tower?",), False),
    (("上下九步行街的骑楼有什么好处？",), False), (("广州为什么被称为花城？",), False),
    (("华南植物园的温室门票多少钱？",), True),  # a price, where the passage says only that it costs
    (("北京路步行街的千年古道遗址有多长？",), True), (("白云山主峰海拔多高？",), False),  # a size: only in its unit

    # a time of day: only a clock time; what the guide leaves to an announcement ("以寺院公告为准") answers nothing
    (("六榕寺每天几点敲钟？",), True), (("广州地铁早高峰大概是几点？",), False), (("今年灯光节的主题是什么？",), True),
    (("学醒狮一般要学多少年才能上台表演？",), True), (("白雲山有邊幾個門可以上山？",), False),  # a count, or a list
    (("永庆坊旁边可以划船的那条河叫什么？",), False), (("六榕寺個名係點嚟嘅？",), False),
    (("珠江夜遊坐船大概要幾耐？",), False), (("长隆野生动物世界的游园小火车坐一圈要多久？",), True),
    # another word for what the passage says (创建, 层): questions written after the benchmark's, on its development half
    (("华南植物园是谁创办的？",), False), (("How many storeys does the Flower Pagoda have inside?",), False),
    (("六榕寺在哪个区？", "它的花塔有几层？"), False),  # jieba's 几层 asks for 层 ("九层"), and the count's rule for a number
    # a time taken: only minutes, hours, days or years; what someone did; "不收门票" is free
    (("白云山索道单程要坐多少分钟？",), True), (("石室圣心大教堂前后建了多久？",), False),
    (("Who designed the Chen Clan Ancestral Hall?",), True), (("Who designed the Canton Tower?",), False),
    (("去沙面要多少钱？",), False),
    # follow-ups: a word that points back asks nothing; other words for holding, paying and when
    (("沙面在哪个区？", "那里有什么好玩的？"), False), (("永庆坊有什么看点？", "李小龙祖居在那里吗？"), False),
    (("广交会在哪里举办？", "When is it held?"), False), (("醒狮是什么？", "什么时候能看到？"), False),
    (("广州地铁几点开始运营？", "坐地铁怎么付钱？"), False),
    # Japanese: its kana ask nothing (は, ますか, ロープウェイ), its question words are glossary words (何区, 完成)
    (("陳家祠は何区にありますか？",), False), (("白雲山にロープウェイはありますか？",), False),
    (("石室聖心大教堂はいつ完成しましたか？",), False),
])
def test_a_question_no_sentence_found_bears_on_is_told_so_in_the_prompt(index, questions, expected):
    history = conversation(*questions)
    search = search_for(history, index.names([GUIDE]), holding(index, GUIDE))
    found = focused(index.search(search.text, [GUIDE], 2, search.documents), questions[-1])
    assert unanswered(found, questions[-1]) == expected
    assert (NOT_ANSWERED in grounded(history, found)[-1]["content"]) == expected


def test_the_reply_to_a_question_no_passage_answers_says_so_in_the_visitors_language_and_script():
    shamian = [Found("k/沙面.md", "沙面", "简介", "沙面是珠江边的一座小岛。", 1.0)]
    for question, said in [("沙面有多少棵树？", "资料里没有这方面的信息：导游资料《沙面》里没有说到"),
                           ("沙面島上有幾多棵樹？", "資料裡沒有這方面的信息：導遊資料《沙面》裡沒有說到"),
                           ("How many trees are on Shamian Island?", "The guide has no information on this: the guide's "
                                                                     "entry 《沙面》 does not say."),
                           ("沙面には木が何本ありますか？", "ガイドの資料にはこの情報がありません（《沙面》"),
                           ("사몐에는 나무가 몇 그루 있습니까?", "가이드 자료에는 이 정보가 없습니다（《沙面》")]:
        reply = in_their_script(not_covered(question, shamian), question)
        assert reply.startswith(said) and says_not_covered(reply), reply
    assert asks("广州塔有多高") and asks("Where is it") and asks("陳家祠喺邊度") and not asks("广州塔真漂亮！")


def test_a_reply_that_claims_a_source_the_passages_do_not_answer_from_is_marked(index):
    """Finding 4 of issue 49: "根据【参考资料】，木棉小馆的老板叫任嚣。" under passages that never name the owner."""
    question = "越秀公园旁边那家叫“木棉小馆”的餐厅，老板叫什么名字？"
    search = search_for(conversation(question), index.names([GUIDE]), holding(index, GUIDE))
    found = focused(index.search(search.text, [GUIDE], 2, search.documents), question)
    assert unanswered(found, question)
    lines, used, missing = appended("根据【参考资料】，越秀公园的五羊石像旁边，木棉小馆的老板叫任嚣。", found, question)
    assert used and "根据【参考资料" in missing[-1] and UNSUPPORTED_MARK in lines
    tower = index.search("广州塔有多高", [GUIDE], 1, [str((GUIDE / "广州塔.md").resolve())])
    assert appended("根据资料显示，广州塔总高度 600 米。", focused(tower, "广州塔有多高？"), "广州塔有多高？")[2] == []


def test_japanese_and_korean_questions_are_answered_in_their_language():
    found = [Found("k/广州塔.md", "广州塔", "简介", "广州塔总高度 600 米。", 1.0)]
    for question, language in [("広州タワーの高さは？", IN_JAPANESE), ("광저우 타워의 높이는?", IN_KOREAN),
                               ("How tall is it?", IN_ENGLISH)]:
        assert grounded([{"role": "user", "content": question}], found)[-1]["content"].endswith(f"{question}\n{language}")
    assert grounded([{"role": "user", "content": "广州塔有多高？"}], found)[-1]["content"].endswith("【问题】\n广州塔有多高？")
    assert says_not_covered("申し訳ありませんが、ガイドの資料にはこの情報がありません。")
    assert says_not_covered("가이드 자료에는 이 정보가 없습니다.")


def test_a_found_passage_carries_its_whole_document(index):
    found = index.search("陈家祠的门票多少钱", [GUIDE], 1)[0]
    assert found.text in found.document and "1888" in found.document and "10 元" in found.document


def test_files_added_changed_removed_and_unreadable_follow_the_folder(tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "访客手册.md").write_text("# 访客手册\n\n停车场在 D 栋地下二层。\n", encoding="utf-8")
    (folder / "坏文件.pdf").write_bytes(b"not a pdf")
    (folder / ".hidden.md").write_text("# 隐藏\n\n停车\n", encoding="utf-8")
    index = KnowledgeIndex(tmp_path / "index.db")
    with caplog.at_level(logging.WARNING, "retrieval.index"):
        report = index.sync(folder)
    assert (report.files, report.skipped) == (1, 1)
    [line] = [record.getMessage() for record in caplog.records]  # one line, and no parser's own warnings
    assert line.startswith(f"Knowledge: skipped {(folder / '坏文件.pdf').resolve()}: ") and "Error" in line
    caplog.clear()
    assert index.sync(folder).indexed == 0 and not caplog.records  # unchanged, and the bad file is not logged again
    assert index.search("停车场在哪里", [folder], 3)[0].name == "访客手册"

    (folder / "访客手册.md").write_text("# 访客手册\n\n停车场搬到了 A 栋。\n", encoding="utf-8")
    os.utime(folder / "访客手册.md", ns=(1, 1))  # a new time even within the file system's clock tick
    assert index.sync(folder).indexed == 1
    assert "A 栋" in index.search("停车场", [folder], 1)[0].text
    (folder / "访客手册.md").unlink()
    assert index.sync(folder).removed == 1
    assert index.search("停车场", [folder], 3) == []
    shutil.rmtree(folder)
    assert index.sync(folder).files == 0  # a folder that went away is empty, not an error


def test_search_reaches_only_the_folders_asked_for(index, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "手册.md").write_text("# 手册\n\n广州塔的内部资料。\n", encoding="utf-8")
    index.sync(other)
    assert {found.name for found in index.search("广州塔", [other], 10)} == {"手册"}
    assert "手册" not in {found.name for found in index.search("广州塔", [GUIDE], 50)}
    assert index.search("广州塔", [], 5) == [] and index.search("？！", [GUIDE], 5) == []
    assert index.search('" OR * NEAR(', [GUIDE], 5) == []  # FTS5's syntax in a question is only text


def test_the_prompt_gets_numbered_passages_within_budget_and_sources_are_what_the_reply_repeats(index):
    found = index.search("广州塔的高度", [GUIDE], 4)
    kept = within(found, 600)
    assert sum(len(passage.text) for passage in kept) <= 600 and kept[0] == found[0]
    assert len(within(found, 50)[0].text) == 50  # the best passage, cut, when none fits whole

    def three_tokens_a_character(text):  # as the tiny test model's tokenizer writes Chinese
        return 3 * len(text)

    assert sum(len(passage.text) for passage in within(found, 600, three_tokens_a_character)) <= 200
    assert len(within(found, 150, three_tokens_a_character)[0].text) == 50
    question = [{"role": "user", "content": "广州塔有多高？"}]
    message = grounded(question, kept)[-1]["content"]
    assert message.startswith("【参考资料】\n[1] 《广州塔》") and message.endswith("【问题】\n广州塔有多高？")
    assert grounded(question, [])[-1]["content"].endswith("没有找到与这个问题相关的内容。\n\n【问题】\n广州塔有多高？")
    assert drawn_on(kept, "广州塔的高度是 600 米。", "广州塔有多高？") == [kept[0]]
    assert drawn_on(kept, kept[0].text, "广州塔有多高？") == [kept[0]]  # not the others that share its names
    assert drawn_on(kept, "资料里没有这方面的信息。", "广州塔有多高？") == []
    assert drawn_on(kept, kept[0].text + RULES, "广州塔有多高？") == [kept[0]]  # quoting the rule is not saying it
    assert drawn_on(kept, "广州塔有多高？我不知道。", "广州塔有多高？") == []  # repeating the question is not drawing


@pytest.mark.parametrize("question, document", [
    ("How tall is the Canton Tower?", "广州塔"), ("Tickets for the Chen Clan Academy", "陈家祠"),
    ("Shamian Island history", "沙面"), ("Whampoa Military Academy", "黄埔军校旧址"), ("广州塔 opening hours?", "广州塔"),
    ("Where is Chenjiaci?", "陈家祠"), ("Baiyunshan hiking", "白云山")])
def test_english_names_and_pinyin_find_the_chinese_entry(index, question, document):
    assert index.search(question, [GUIDE], 1)[0].name == document


def test_english_words_are_matched_as_words():
    assert terms("How tall are the Canton Tower's TOWERS?") == ["tall", "canton", "tower", "tower"]
    assert terms("cities, buses, ferries") == ["city", "bus", "ferry"]
    assert romanized("陈家祠（广东民间工艺博物馆）").startswith("chenjiaci chen jia ci guangdong guang dong")
    assert translated("How tall is it? Tickets?") == ["高", "高度", "门票", "票价", "免费"]


def test_the_model_gets_the_sentences_that_bear_on_the_question_and_the_visitor_the_whole_passage(index):
    found = index.search("广州塔的高度是多少？", [GUIDE], 4)
    [best, *_] = cut = focused(found, "广州塔的高度是多少？")
    assert "总高度 600 米" in best.text and "小蛮腰" not in best.text and best.whole == found[0].text
    assert stored([best])[0]["text"] == found[0].text
    assert sum(len(passage.text) for passage in cut) < sum(len(passage.text) for passage in found) / 3
    english = "How tall is the Canton Tower?"
    assert focused(found, english)[0].text == best.text  # "tall" is 高 (retrieval/glossary.toml)
    assert focused(found, "Tell me about the Canton Tower")[0] == found[0]  # nothing to choose by: the best, whole
    assert grounded([{"role": "user", "content": english}], found)[-1]["content"].endswith(f"{english}\n{IN_ENGLISH}")
    for question, english in [("How tall is 广州塔?", True), ("Canton Tower height", True),
                              ("Chen Clan Academy 在哪个区？", False), ("广州塔有多高？", False)]:  # the words that ask
        assert grounded([{"role": "user", "content": question}], found)[-1]["content"].endswith(IN_ENGLISH) == english


def test_the_command_indexes_the_folders_and_shows_what_a_question_finds(tmp_path):
    environment = {**os.environ, "CHAT_STATE_DIR": str(tmp_path)}
    shown = subprocess.run([sys.executable, "-m", "retrieval", "陈家祠几点开门"], capture_output=True, text=True,
                           env=environment, cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "[1] " in shown.stdout and "陈家祠 · " in shown.stdout and (tmp_path / "knowledge.db").is_file()
    assert f"{GUIDE}: 50 files" in shown.stderr


def test_an_operators_answer_answers_other_wordings_of_its_question_and_nothing_else(tmp_path):
    """An entry written from the operator's page is named by its question: "充电宝借吗" cut into 充电 and 宝借 leaves
    宝借, which no sentence holds, and the app said the entry written for it did not say it (seen on the 1.5B demo)."""
    (tmp_path / "陈家祠附近哪里可以租充电宝.md").write_text(entry(
        "陈家祠附近哪里可以租充电宝", "陈家祠门口的游客服务点和地铁陈家祠站 D 出口都有共享充电宝，扫码租借。",
        ["陈家祠附近哪里可以租充电宝？"]), encoding="utf-8")
    index = KnowledgeIndex(tmp_path / "index.db")
    index.sync(tmp_path)
    for question, answered in [("陈家祠有充电宝借吗？", True), ("陈家祠附近哪里能借到充电宝？", True), ("在陈家祠能租充电宝吗？", True),
                               ("陈家祠附近停车多少钱？", False), ("陈家祠的充电宝多少钱一小时？", False)]:
        found = index.search(question, [tmp_path], 1)
        assert unanswered(found, question) is not answered, question
