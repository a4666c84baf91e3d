"""The knowledge base in the real app (on the scripted engine): grounded replies name their sources, whose passages
open beside the chat and come back when the conversation is resumed; operators' documents (`CHAT_KNOWLEDGE_DIR`) serve
every persona; the chat setting turns it off; the teaching view shows the passages, their scores and their place in
the prompt; an unreadable file is skipped with one log line. The fake engine's `[quote]` replies repeat the question
as the engine got it, so what the app put before the question shows in the reply."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from harness.visitor import until, visit
from history.conversation import SOURCES_MARK, UNCHECKED
from retrieval.grounding import NOT_COVERED
from tests.fake_engine import QUOTE
from tests.support import ARTIFACTS, ROOT, FakeApp, login_cookie, users_file

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def knowledge_app(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    documents = tmp_path_factory.mktemp("operators")
    shutil.copy(ROOT / "bench" / "samples" / "访客手册.md", documents)
    (documents / "坏文件.pdf").write_bytes(b"not a pdf at all")
    users_file(state, ("alice",))
    ARTIFACTS.mkdir(exist_ok=True)
    running = FakeApp(ARTIFACTS / "app-knowledge.log", CHAT_STATE_DIR=str(state), CHAT_KNOWLEDGE_DIR=str(documents),
                      CHAT_USERS_FILE=str(state / "users.json"), CHAT_MAX_NEW_TOKENS="60", CHAT_MAX_MODEL_LEN="4096")
    running.wait_until_ready(timeout=60)
    running.state = state
    running.cookie = {"Cookie": login_cookie(running.url, "alice")}
    yield running
    running.stop()


async def test_a_grounded_reply_names_its_sources_which_open_their_passages_and_come_back_on_resume(knowledge_app):
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    await visitor.ask_and_wait(f"广州塔的高度是多少？{QUOTE}")
    reply = visitor.replies()[-1]
    assert "【参考资料】\n[1] 《广州塔》" in reply and SOURCES_MARK + "广州塔 · 简介、历史" in reply
    passage = next(element for element in visitor.elements() if element["name"] == "广州塔 · 简介、历史")
    assert passage["name"] == "广州塔 · 简介、历史" and passage["display"] == "side"
    assert "天线桅杆" in reply and "昵称“小蛮腰”" not in reply  # the model gets the sentences that bear on the question
    thread = next(data["threadId"] for event, data in visitor.events if event == "new_message" and data.get("threadId"))
    await visitor.socket.disconnect()

    again = await visit(knowledge_app.url, knowledge_app.cookie, thread_id=thread)
    await until(lambda: any(element["name"] == passage["name"] for element in again.elements()))
    resent = next(element for element in again.elements() if element["name"] == passage["name"])
    assert resent["forId"] == passage["forId"] and resent["display"] == "side"
    await again.ask_and_wait(f"它几点开门？{QUOTE}")  # the model's history holds the reply without its sources line
    assert "《广州塔》" in again.replies()[-1]  # the follow-up found the tower through the question before it
    await again.ask_and_wait("再说一次")  # a reply that repeats no passage names none, and is marked not checked
    assert SOURCES_MARK not in again.replies()[-1] and again.replies()[-1].endswith(UNCHECKED)
    await again.socket.disconnect()


async def test_a_question_no_passage_answers_is_told_so_in_words_without_the_model(knowledge_app):
    """Finding 4 of issue 49: the guide's entry on 沙面 says nothing of its trees."""
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    await visitor.socket.emit("chat_settings_change", {"teaching": True})
    await visitor.ask_and_wait(f"沙面岛上一共有多少棵树？{QUOTE}")
    assert visitor.replies()[-1].startswith(f"{NOT_COVERED}：导游资料《沙面》里没有说到。")
    assert visitor.generated_tokens == 0 and visitor.footer["by_app"]
    assert not any(event == "stream_start" for event, _ in visitor.events)
    step = next(data["output"] for event, data in visitor.events
                if event in ("new_message", "update_message") and data.get("name") == "检索 Retrieval" and data["output"])
    assert "没有调用模型" in step and "沙面 · " in step
    await visitor.ask_and_wait("沙面島上一共有幾多棵樹？")
    assert visitor.replies()[-1].startswith("資料裡沒有這方面的信息")
    await visitor.ask_and_wait("谢谢")  # the page holds both replies; the model sees neither, nor their questions
    assert visitor.replies()[-1].startswith("[1 messages]")
    await visitor.socket.disconnect()


async def test_a_question_answered_by_the_app_is_left_out_of_what_the_model_sees_also_when_resumed(knowledge_app):
    """The demo models, shown the app's "资料里没有这方面的信息" in the history, said it again to a later question the
    passages answered (docs/knowledge.md)."""
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    await visitor.ask_and_wait("广州塔的高度是多少？")
    await visitor.ask_and_wait("沙面岛上一共有多少棵树？")
    await visitor.ask_and_wait(f"沙面在哪个区？{QUOTE}")
    reply = visitor.replies()[-1]
    assert reply.startswith("[3 messages]") and "《沙面》" in reply
    thread = next(data["threadId"] for event, data in visitor.events if event == "new_message" and data.get("threadId"))
    await visitor.socket.disconnect()

    again = await visit(knowledge_app.url, knowledge_app.cookie, thread_id=thread)
    await again.ask_and_wait("谢谢")
    assert again.replies()[-1].startswith("[5 messages]")
    await again.socket.disconnect()


async def test_a_question_in_written_cantonese_reaches_the_model_in_mandarins_words_and_is_answered_in_its_script(
        knowledge_app):
    """The 1.5B misread written Cantonese ("北京路步行街使唔使買門票？" got "资料里没有这方面的信息" beside "不收门票"): the
    model is given the question in Mandarin's words; the visitor keeps theirs and gets the reply in Hong Kong's forms."""
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    await visitor.ask_and_wait(f"沙面喺邊個區？{QUOTE}")
    reply = visitor.replies()[-1]
    assert "【問題】\n沙面在哪個區？" in reply and "喺邊個" not in reply  # the quoted prompt, in Hong Kong's forms
    assert "《沙面》" in reply  # found by the visitor's own words
    await visitor.socket.disconnect()


async def test_a_question_in_written_cantonese_that_the_guide_answers_is_not_told_it_does_not(knowledge_app):
    """Whether the passages answer is judged in the words the model reads: in the visitor's, jieba cut "係邊個題嘅" into
    谁题 and "幾多年" into 多年, words no passage holds, and the app said "資料裡沒有" to questions the guide answers."""
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    for question in ("六榕寺嘅名字係邊個題嘅？", "石室聖心大教堂建了幾多年？"):
        await visitor.ask_and_wait(question)
        assert visitor.generated_tokens > 0 and not visitor.footer.get("by_app"), visitor.replies()[-1]
    await visitor.socket.disconnect()


async def test_operators_documents_serve_every_persona_and_an_unreadable_file_is_skipped(knowledge_app):
    for persona in ("tour_guide", "assistant"):
        visitor = await visit(knowledge_app.url, knowledge_app.cookie, profile=persona)
        await visitor.ask_and_wait(f"访客停车场在哪里？{QUOTE}")
        assert "访客手册" in visitor.replies()[-1].rsplit(SOURCES_MARK, 1)[1]
        await visitor.socket.disconnect()
    log = knowledge_app.log()
    assert log.count("Knowledge: skipped") == 1 and "坏文件.pdf: " in log


async def test_a_question_that_fits_alone_is_never_refused_for_its_passages(knowledge_app):
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    question = "广州塔" * 1000  # 3,000 tokens on the fake: fits alone, not with passages (4,096 tokens of context)
    await visitor.ask_and_wait(question)
    assert not visitor.errors() and visitor.replies()
    await visitor.socket.disconnect()


async def test_with_the_knowledge_base_off_the_question_goes_alone(knowledge_app):
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    await visitor.socket.emit("chat_settings_change", {"knowledge": False})
    await visitor.ask_and_wait(f"广州塔有多高？{QUOTE}")
    reply = visitor.replies()[-1]
    assert "参考资料" not in reply and SOURCES_MARK not in reply and reply.endswith(f"广州塔有多高？{QUOTE}")
    await visitor.socket.disconnect()


async def test_the_teaching_view_shows_each_passage_its_score_and_its_lines_in_the_prompt(knowledge_app):
    visitor = await visit(knowledge_app.url, knowledge_app.cookie)
    await visitor.socket.emit("chat_settings_change", {"teaching": True})
    await visitor.ask_and_wait("陈家祠的门票多少钱？")
    view = [data["output"] for event, data in visitor.events
            if event in ("new_message", "update_message") and data.get("name") == "提示词 Prompt" and data["output"]][-1]
    table = view.split("```")[0]
    prompt_lines = view.split("```text\n", 1)[1].split("\n")
    row = next(line for line in table.splitlines() if "陈家祠 ·" in line)
    _, number, score, source, lines, _ = row.split("|")
    first, last = map(int, lines.strip().split("–"))
    assert float(score) > 0 and number.strip() == "1"
    assert prompt_lines[first - 2].startswith("[1] 《陈家祠") and first <= last  # its header, then the passage
    assert prompt_lines[last] == "" and prompt_lines[last + 1].startswith(("[2] ", "【问题】"))
    check = next(element for element in visitor.elements() if element["name"] == "核对 Check")  # the reply's check
    replies = [data["id"] for event, data in visitor.events if event == "stream_start"]
    assert check["display"] == "inline" and check["forId"] == replies[-1]
    await visitor.socket.disconnect()


def test_the_index_is_a_file_in_the_state_folder_listing_each_document(knowledge_app):
    with sqlite3.connect(knowledge_app.state / "knowledge.db") as index:
        names = {Path(path).name for (path,) in index.execute("SELECT path FROM documents WHERE problem = ''")}
    assert {"访客手册.md", "广州塔.md", "陈家祠.md"} <= names and "坏文件.pdf" not in names


def test_a_document_copied_in_while_the_app_runs_is_indexed_at_once(tmp_path):
    """The folders are watched: a file copied in is searched within seconds, not at the next rescan (every
    `RESCAN_SECONDS`, which stays for disks that send no events)."""
    import time

    from retrieval.knowledge_base import RESCAN_SECONDS, KnowledgeBase

    operators = tmp_path / "operators"
    operators.mkdir()
    knowledge = KnowledgeBase(tmp_path / "index.db", operators, {"tour_guide": ()})
    knowledge.start()
    assert knowledge.ready.wait(60)
    time.sleep(1)  # the watch starts after the first pass
    copied = time.monotonic()
    (operators / "塔.md").write_text("# 广州塔\n\n广州塔高600米，位于海珠区，是这份测试文档的内容。", encoding="utf-8")
    while not knowledge.index.names([operators]) and time.monotonic() - copied < 2 * RESCAN_SECONDS:
        time.sleep(0.1)
    assert knowledge.index.names([operators]), "not indexed at all"
    assert time.monotonic() - copied < RESCAN_SECONDS / 2, "indexed only at the rescan"
