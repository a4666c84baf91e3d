"""The chat handlers' logic, in seconds: the real app (`chainlit run app.py`) over its real sockets, on the
scripted engine of `tests/fake_engine.py` instead of vLLM (started by `tests/fake_app.py`).

Each fake reply starts with `[N messages]`, the number of messages the app sent the engine, so a test reads
from the next reply what the conversation kept. One reply at a time (CHAT_MAX_CONCURRENT_REPLIES=1), so the
line has a second place to show.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from harness.visitor import ChatClient, until, visit
from tests.fake_engine import ALTERNATIVE, FAIL, NOTHING, THINKING_WORDS
from tests.support import ARTIFACTS, FakeApp, token_views

pytestmark = pytest.mark.fast
REPLY_TOKENS = 50  # a second of words at the fake's pace


@pytest.fixture(scope="module")
def fake_app():
    ARTIFACTS.mkdir(exist_ok=True)
    with FakeApp(ARTIFACTS / "app-fake.log", CHAT_MAX_NEW_TOKENS=str(REPLY_TOKENS), CHAT_MAX_CONCURRENT_REPLIES="1",
                 CHAT_MAX_MODEL_LEN="2048") as running:
        yield running


async def test_each_reply_sees_the_conversation_so_far(fake_app):
    visitor = await visit(fake_app.url)
    first = await visitor.ask_and_wait("你好")
    assert first.startswith("[1 messages] w1 w2") and first.endswith(f" w{REPLY_TOKENS - 1}")
    assert (await visitor.ask_and_wait("再说一遍")).startswith("[3 messages]")
    await visitor.socket.disconnect()


async def test_stop_keeps_the_partial_reply(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.ask("讲一个很长的故事")
    await until(lambda: " w10" in visitor.text)
    started = time.monotonic()
    await visitor.socket.emit("stop")
    await asyncio.wait_for(visitor.done.wait(), 5)  # the stopped reply gets its footer
    assert time.monotonic() - started < 2
    kept = visitor.text
    assert f" w{REPLY_TOKENS - 1}" not in kept
    assert re.search(r"\d+ generated, .*, abort, sidebar on", fake_app.log())
    assert (await visitor.ask_and_wait("继续")).startswith("[3 messages]")  # the partial reply is in the history
    await visitor.socket.disconnect()


async def test_a_message_too_long_is_refused_and_not_kept(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.ask("长" * 3000)
    await until(lambda: visitor.errors())
    assert "too long" in visitor.errors()[0] and visitor.text == ""
    assert (await visitor.ask_and_wait("短一点")).startswith("[1 messages]")
    await visitor.socket.disconnect()


async def test_an_engine_fault_ends_the_reply_with_a_message_and_keeps_what_was_said(fake_app):
    visitor = await visit(fake_app.url)
    said = await visitor.ask_and_wait(f"{FAIL} 你好")
    assert said == "[1 messages] w1 w2"
    assert "模型引擎出错" in visitor.errors()[0] and "ask again" in visitor.errors()[0]
    assert (await visitor.ask_and_wait("你好")).startswith("[3 messages]")
    await visitor.socket.disconnect()


async def test_a_reply_the_model_ends_before_a_word_says_so(fake_app):
    visitor = await visit(fake_app.url)
    assert await visitor.ask_and_wait(f"{NOTHING} 你好") == ""  # a visitor's wait (the harness's) ends with the notice
    assert "no answer" in visitor.errors()[0] and "ask again" in visitor.errors()[0] and visitor.replies() == []
    assert (await visitor.ask_and_wait("你好")).startswith("[2 messages]")  # two questions, no answer
    await visitor.socket.disconnect()


async def test_the_knowledge_benchmark_scores_a_reply_the_model_never_wrote_as_none(fake_app):
    from bench.knowledge import ask

    scored = await ask(fake_app.url, ["你好", f"{NOTHING} 再说一遍"], knowledge=False, temperature=0)
    assert scored["answer"] == "" and scored["before"] == ["你好"]  # not the reply to the question before


async def test_the_second_visitor_waits_in_line_with_a_notice(fake_app):
    first, second = await visit(fake_app.url), await visit(fake_app.url)
    await first.ask("你好")
    await until(lambda: first.text)
    second_reply = asyncio.create_task(second.ask_and_wait("我也想问"))
    await until(lambda: second.said("排队中：您前面还有 0 位"))
    assert not first.done.is_set()  # the notice came while the first reply was still streaming
    assert (await second_reply).startswith("[1 messages]")
    # The notice went when its turn came.
    assert any(event == "delete_message" and "排队中" in data["output"] for event, data in second.events)
    await asyncio.gather(first.socket.disconnect(), second.socket.disconnect())


async def test_a_setting_out_of_range_is_refused_and_the_old_value_kept(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.socket.emit("chat_settings_change", {"temperature": 9, "top_p": 0.5})
    await until(lambda: visitor.errors())
    assert "9 is outside 0–2; 0.3 is kept" in visitor.errors()[0]  # the tour guide's own default
    await visitor.ask_and_wait("你好")
    assert fake_app.reply_stats()[-1].startswith("Reply: temperature 0.3, top_p 0.5,")
    await visitor.socket.disconnect()


async def test_the_teaching_view_shows_the_prompt_the_engine_got(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.ask_and_wait("第一个问题")
    await visitor.socket.emit("chat_settings_change", {"teaching": True})
    await visitor.ask_and_wait("第二个问题")
    prompts = prompts_shown(visitor)
    assert "<|im_start|>user\n第一个问题<|im_end|>\n<|im_start|>assistant\n[1 messages] w1" in prompts[-1]
    # the newest question after the passages the knowledge base found for it (tests/test_knowledge.py)
    assert prompts[-1].rstrip("`\n").endswith("【问题】\n第二个问题<|im_end|>\n<|im_start|>assistant")
    await visitor.socket.disconnect()


async def test_the_tokenize_command_splits_the_text_and_adds_nothing_to_the_conversation(fake_app):
    visitor = await visit(fake_app.url)
    assert [[command["id"] for command in data] for event, data in visitor.events if event == "set_commands"] == [
        ["tokenize"]]
    replies_before = fake_app.log().count("Reply:")
    tasks_ended = [event for event, _ in visitor.events].count("task_end")
    await visitor.ask("广州塔 tower", command="tokenize")
    await until(lambda: any(element["name"] == "TokenView" for element in visitor.elements()))
    # The page takes the next question once the command's task is over, as a visitor's composer does.
    await until(lambda: [event for event, _ in visitor.events].count("task_end") > tasks_ended)
    view = next(element for element in visitor.elements() if element["name"] == "TokenView")
    assert [token["text"] for token in view["props"]["tokens"]] == list("广州塔 tower")  # the fake's tokenizer
    assert [token["id"] for token in view["props"]["tokens"]] == [ord(character) for character in "广州塔 tower"]
    assert visitor.said(r"scripted-fake: \*\*9 个词元 tokens\*\* · 9 个字符 characters")
    assert not visitor.replies() and fake_app.log().count("Reply:") == replies_before  # nothing was generated
    assert (await visitor.ask_and_wait("你好")).startswith("[1 messages]")  # the text did not enter the conversation
    await visitor.socket.disconnect()

def prompts_shown(visitor: ChatClient) -> list[str]:
    """The teaching view's prompt steps the visitor was sent, as their text came, oldest first."""
    return [data["output"] for event, data in visitor.events
            if event in ("new_message", "update_message") and data.get("name") == "提示词 Prompt" and data["output"]]


async def test_a_chosen_token_branches_the_reply_and_the_teacher_keeps_either(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.socket.emit("chat_settings_change", {"teaching": True})
    original = await visitor.ask_and_wait("第一个问题")
    view = token_views(visitor)[-1]
    said = [token["text"] for token in view["props"]["tokens"]]
    assert "".join(said) == original and said[3] == " w3"
    response = await visitor.press("force_token", {"element": view["id"], "index": 3, "token": ALTERNATIVE})
    assert response.status_code == 200
    branch_view = token_views(visitor)[-1]
    assert branch_view["props"]["branch_from"] == 3
    branched = [token["text"] for token in branch_view["props"]["tokens"]]
    assert branched[:5] == [*said[:3], " alt", " c1"]  # the kept tokens, the chosen one, then the model's
    branch = [data for event, data in visitor.events if event == "update_message" and "set_aside" in data["metadata"]]
    assert branch[-1]["output"] == "".join(branched)
    keep = [data for event, data in visitor.events if event == "action" and data["forId"] == branch[-1]["id"]]
    assert keep and keep[-1]["name"] == "keep_reply"

    # What no page sends: a token that is not an alternative there, a view that is not one, crafted types.
    errors = len(visitor.errors())
    for payload in ({"element": view["id"], "index": 3, "token": 123456}, {"element": "x", "index": 3, "token": 7},
                    {"element": [view["id"]], "index": "3", "token": 7}, {"element": view["id"], "index": 10**6}):
        assert (await visitor.press("force_token", payload)).status_code == 200
    assert (await visitor.press("keep_reply", {"reply": {"id": 1}})).status_code == 200
    await until(lambda: len(visitor.errors()) == errors + 5)

    # The conversation holds the original until the branch is kept, and then the branch.
    await visitor.press("keep_reply", {"reply": branch[-1]["id"]})
    await visitor.ask_and_wait("第二个问题")
    prompt = prompts_shown(visitor)[-1]
    assert "[1 messages] w1 w2 alt c1 c2" in prompt and " w2 w3" not in prompt
    await visitor.socket.disconnect()


async def test_compare_streams_two_labelled_replies_at_once_and_the_conversation_holds_one(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.socket.emit("chat_settings_change", {"compare": True, "compare_temperature": 1.2,
                                                       "compare_seed": 42})
    await visitor.ask_and_wait("第一个问题")
    await until(lambda: fake_app.log().count("Compared reply:") == 1)
    starts = [index for index, (event, _) in enumerate(visitor.events) if event == "stream_start"]
    ends = [index for index, (event, data) in enumerate(visitor.events)
            if event == "update_message" and {"reply", "set_aside"} & set(data.get("metadata") or {})]
    assert len(starts) == 2 and max(starts) < min(ends)  # both streaming before either ended
    labels = {element["forId"]: element["props"]["label"] for element in visitor.elements()
              if element["name"] == "ReplyFooter"}
    held = [data for event, data in visitor.events if event == "update_message" and "reply" in data["metadata"]][-1]
    aside = [data for event, data in visitor.events if event == "update_message" and "set_aside" in data["metadata"]][-1]
    assert labels[held["id"]].startswith("温度 temperature 0.3 · 随机")  # the chat's own sampling
    assert "seed 42" in labels[aside["id"]]
    assert any(event == "action" and data["forId"] == aside["id"] for event, data in visitor.events)
    await visitor.press("keep_reply", {"reply": aside["id"]})
    await until(lambda: any(event == "update_message" and data["id"] == aside["id"] and "reply" in data["metadata"]
                            for event, data in visitor.events))
    assert (await visitor.ask_and_wait("第二个问题")).startswith("[3 messages]")  # one reply of the two
    await visitor.socket.disconnect()


def thoughts(visitor: ChatClient) -> dict[str, dict]:
    """The thinking steps the visitor was sent, by id: their streamed text and whether they ended."""
    steps: dict[str, dict] = {}
    for event, data in visitor.events:
        if event == "stream_start" and data.get("name") == "思考过程 Thinking":
            steps[data["id"]] = {"text": data["output"], "ended": False}
        elif event == "stream_token" and data["id"] in steps:
            steps[data["id"]]["text"] += data["token"]
        elif event == "update_message" and data.get("id") in steps:
            steps[data["id"]]["ended"] = bool(data.get("end"))
    return steps


async def test_thinking_streams_into_a_step_that_never_enters_the_history(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.socket.emit("chat_settings_change", {"thinking": True, "teaching": True})
    await visitor.ask_and_wait("第一个问题")
    [thought] = thoughts(visitor).values()
    assert thought == {"text": "".join(f"t{index} " for index in range(1, THINKING_WORDS + 1)), "ended": True}
    await visitor.ask_and_wait("第二个问题")
    assert visitor.text.split("[")[-1].startswith("3 messages]")  # question, answer, question
    prompt = prompts_shown(visitor)[-1]
    assert "<|im_start|>assistant\n[1 messages] w1" in prompt and "t1" not in prompt
    await visitor.socket.disconnect()


async def test_stop_while_thinking_keeps_the_thought_and_adds_nothing_to_the_history(fake_app):
    visitor = await visit(fake_app.url)
    await visitor.socket.emit("chat_settings_change", {"thinking": True})
    await visitor.ask("第一个问题")
    await until(lambda: any(thought["text"] for thought in thoughts(visitor).values()))
    await visitor.socket.emit("stop")
    await until(lambda: all(thought["ended"] for thought in thoughts(visitor).values()))
    [stopped] = thoughts(visitor).values()
    assert stopped["text"].startswith("t1 ") and "[" not in stopped["text"]
    await visitor.socket.emit("chat_settings_change", {"thinking": False})
    assert (await visitor.ask_and_wait("第二个问题")).startswith("[2 messages]")  # two questions, no answer
    await visitor.socket.disconnect()
