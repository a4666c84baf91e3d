"""End to end on the demo models in Chromium: the tour guide answers in Chinese, from the guide and an operator's
handbook, naming its sources; Tokenize and Compare; the sidebar follows a reply and costs it nothing.

One app on the 0.5B demo model serves most tests here (module fixture `demo_app`).
"""

from __future__ import annotations

import json
import re
import shutil
import time

import psutil
import pytest

from config.personas import load_personas
from harness.browser import (
    READ_STATS,
    RECORD_STATS,
    REPLY,
    ask_and_wait,
    hear_speech,
    open_chat,
    send,
    set_option,
    set_slider,
    socket_events,
    wait_until,
)
from history.conversation import model_text
from modelprep.hardware import fast_int8, resolve_dtype
from tests.support import ARTIFACTS, ROOT, RunningApp, smaps_rollup_pss

pytestmark = pytest.mark.e2e

# A whole reply of a demo model, in ms: 200 tokens take about 25 s in float32 on 2 cores, and over 120 s once on a CI
# machine shared with other work; the bound only tells a slow reply from one that never ends.
WHOLE_REPLY = 300_000
OPERATORS = ARTIFACTS / "operators"  # the demo app's CHAT_KNOWLEDGE_DIR: the sample visitor handbook


@pytest.fixture(scope="module")
def demo_app(demo_model_dir):
    """The app on the bundled 0.5B demo model, named as a user names it; greedy for a fixed answer; an operator's
    handbook in its knowledge folder."""
    OPERATORS.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "bench" / "samples" / "访客手册.md", OPERATORS)
    running = RunningApp("demo-0.5b", ARTIFACTS / "app-demo.log", CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="200",
                         CHAT_KNOWLEDGE_DIR=str(OPERATORS))
    running.wait_until_ready()
    yield running
    running.stop()


def test_demo_model_answers_the_tour_guide_in_chinese(browser, demo_app):
    question = "推荐三个广州的景点"
    page = open_chat(browser, demo_app)
    send(page, question)
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=WHOLE_REPLY)
    text = page.locator(REPLY).last.inner_text()
    # int8 by default where the CPU computes it fast, else the original weights
    expected = "-int8, int8 weights" if fast_int8() else f", {resolve_dtype('auto')} weights"
    assert f"Engine ready: Qwen2.5-Coder-0.5B-Instruct-Q4_K_M{expected}" in demo_app.log()
    assert len(re.findall(r"[\u4e00-\u9fff]", text.replace(question, ""))) >= 30, text
    assert not re.search(r"<\|[a-z_]+\|>", text), text
    page.screenshot(path=str(ARTIFACTS / "demo-chat.png"))
    page.close()


def test_the_tokenize_command_shows_the_models_tokens_and_generates_nothing(browser, demo_app, demo_model_dir):
    from transformers import AutoTokenizer

    text = "广州塔高600米，Canton Tower 龘"  # 龘: one character over three tokens
    page = open_chat(browser, demo_app)
    replies = demo_app.log().count("Reply:")
    page.click("#command-tokenize")  # the composer's button
    send(page, text)
    page.wait_for_selector("[data-token-view] [data-token-id]", timeout=30_000)
    ids = page.locator("[data-token-view]").last.locator("[data-token-id]").evaluate_all(
        "spans => spans.map(span => Number(span.dataset.tokenId))")
    expected = AutoTokenizer.from_pretrained(demo_model_dir).encode(text, add_special_tokens=False)
    assert ids == expected
    page.wait_for_selector(f"text={len(expected)} 个词元 tokens")
    assert page.locator("[data-token-view]").last.get_by_text("\\xbe").count() == 1  # a split character's byte
    page.screenshot(path=str(ARTIFACTS / "tokenize.png"))
    assert demo_app.log().count("Reply:") == replies  # nothing was generated
    page.close()


def test_compare_streams_a_greedy_and_a_hot_reply_together(browser, demo_app):
    """Compare at temperatures 0 (the chat's, greedy here) and 1.2: two replies stream at the same time, each labelled,
    and the greedy one is the reply the question gets without Compare."""
    question = "用一句话介绍广州"
    alone = open_chat(browser, demo_app)
    expected = ask_and_wait(alone, question).split("\n")[0]
    alone.close()
    page = open_chat(browser, demo_app)
    page.set_viewport_size({"width": 1600, "height": 900})
    set_option(page, "compare", True)
    set_slider(page, "compare_temperature", 24)  # 24 steps of 0.05
    send(page, question)
    page.wait_for_selector("[data-compare-label]", timeout=30_000)
    page.wait_for_function("document.querySelectorAll('.step [data-compare-label]').length == 2", timeout=30_000)
    compared = page.locator(".step:has([data-compare-label])")
    # Side by side, once the page has laid out the second (a reply that starts streaming first may be drawn a moment
    # alone in its row).
    page.wait_for_function("""() => {
        const [a, b] = [...document.querySelectorAll('.step:has([data-compare-label])')].map(s => s.getBoundingClientRect());
        return a && b && a.y === b.y; }""", timeout=10_000)
    page.wait_for_selector("#chat-submit", timeout=WHOLE_REPLY)
    starts = [at for at, _ in socket_events(page, "stream_start")]
    ends = [at for at, step in socket_events(page, "update_message") if {"reply", "set_aside"} & set(step["metadata"])]
    assert len(starts) == 2 and max(starts) < min(ends)  # streaming together
    labels = page.locator("[data-compare-label]").all_inner_texts()
    assert len(labels) == 2 and any("temperature 0" in label for label in labels) and any(
        "temperature 1.2" in label for label in labels)
    held = [step for _, step in socket_events(page, "update_message") if "reply" in step["metadata"]][-1]
    assert held["output"].split("\n")[0] == expected
    page.screenshot(path=str(ARTIFACTS / "compare.png"))
    page.set_viewport_size({"width": 700, "height": 900})  # a narrow page: one above the other
    page.wait_for_timeout(500)
    assert compared.nth(1).bounding_box()["y"] > compared.nth(0).bounding_box()["y"]
    page.close()


SIGHTS = ("陈家祠", "沙面", "上下九", "花城广场", "广州塔", "越秀公园", "北京路", "珠江", "中山纪念堂", "永庆坊", "白云山")


def test_the_tour_guide_plans_a_day_through_real_places_naming_its_source(browser, demo_app):
    """The first starter, clicked, gets a route through sights of the guide in `knowledge/`; each source's name opens
    its passage. (The operator's handbook is asked of the default demo model, below: on an AMX machine the 0.5B's
    greedy answer to it loops on the passage's label.)"""
    starter = load_personas(ROOT / "prompts", "tour_guide")[0].starters[0]
    page = open_chat(browser, demo_app)
    page.get_by_text(starter.label).click()
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=WHOLE_REPLY)
    page.wait_for_selector(f"{REPLY} >> text=来源 Sources", timeout=10_000)
    text = page.locator(REPLY).last.inner_text()
    assert len([sight for sight in SIGHTS if sight in text]) >= 3, text
    link = page.locator(f"{REPLY} a.element-link").first
    document = link.inner_text().split(" · ")[0]
    assert (ROOT / "knowledge" / f"{document}.md").is_file()
    title = (ROOT / "knowledge" / f"{document}.md").read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    link.click()
    page.wait_for_selector(f"text=《{title}》", timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "sources.png"))
    page.close()


def test_the_larger_demo_model_answers_the_tour_guide_in_chinese_and_from_the_handbook(browser):
    """`CHAT_MODEL=demo-1.5b`, which ./test.sh's set-up prepares like the 0.5B one, and which is the default where int8
    is fast: a question on the operator's handbook is answered from it, and the handbook named."""
    question = "广州早茶有哪些必点的点心？"
    OPERATORS.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "bench" / "samples" / "访客手册.md", OPERATORS)
    running = RunningApp("demo-1.5b", ARTIFACTS / "app-demo-1.5b.log", CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="80",
                         CHAT_KNOWLEDGE_DIR=str(OPERATORS))
    try:
        running.wait_until_ready()
        page = open_chat(browser, running)
        text = ask_and_wait(page, question)
        assert "Engine ready: Qwen2.5-Coder-1.5B-Instruct-Q4_K_M" in running.log()
        assert len(re.findall(r"[\u4e00-\u9fff]", text.replace(question, ""))) >= 20, text
        assert not re.search(r"<\|[a-z_]+\|>", text), text
        page.screenshot(path=str(ARTIFACTS / "demo-1.5b-chat.png"))
        page.close()
        page = open_chat(browser, running)
        ask_and_wait(page, "访客停车场在哪里？怎么收费？")
        assert wait_until(lambda: "来源 Sources" in page.locator(REPLY).last.inner_text(), 30)
        reply = page.locator(REPLY).last.inner_text()
        assert re.search(r"D\s*栋", reply) and "访客手册" in reply.split("来源 Sources")[1], reply
        page.close()
    finally:
        running.stop()




def test_sidebar_follows_a_reply_and_matches_measurements(browser, demo_app, demo_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from retrieval.grounding import RULES, grounded
    from retrieval.knowledge_base import KnowledgeBase


    page = open_chat(browser, demo_app, RECORD_STATS)
    page.set_viewport_size({"width": 1400, "height": 900})  # the README's screenshot
    page.wait_for_selector('[data-stat="app_memory_mib"]', timeout=30_000)
    question = "详细介绍广州的五个景点，每个写两三句话"  # greedy: 199 tokens, 5.5 s here
    # Once the sidebar has shown the reply's first tokens, the machine's memory in use grows by 512 MiB (here, in the
    # test process) and the sidebar's next refreshes show it moving. (On a quiet machine it may otherwise not move by
    # a MiB in five seconds. Counting on the whole 512 MiB failed twice: this virtual machine backs memory touched
    # for the first time slowly, 1.3 s for these 512 MiB here, and hands freed memory back over seconds, while other
    # processes' memory moves by hundreds of MiB.)
    send(page, question)
    page.wait_for_function("() => Number(document.querySelector('[data-stat=\"generated_tokens\"]')?.innerText) > 0",
                           timeout=60_000)
    ballast = b"\x01" * 2**29
    page.wait_for_selector("#chat-submit", timeout=WHOLE_REPLY)
    page.wait_for_selector('[data-stat="reply_footer"]', timeout=10_000)
    time.sleep(1.0)  # the final refresh follows the footer
    final = page.evaluate(READ_STATS)
    history = page.evaluate("window.statHistory")
    streaming = [values for values in history if values.get("running") == "1"]
    # While the reply streamed, the sidebar changed about every second (CHAT_SIDEBAR_UPDATE_SECONDS): speed, counts
    # and memory moved.
    assert len({values["tokens_per_s"] for values in streaming}) >= 3, streaming[-3:]
    assert len({values["generated_tokens"] for values in streaming}) >= 3
    assert len({values["system_used_mib"] for values in streaming}) >= 2, streaming[-3:]
    del ballast
    assert final["running"] == "0" and final["model"].startswith("Qwen2.5-Coder-0.5B-Instruct")
    assert final["weights"] == ("int8" if fast_int8() else resolve_dtype("auto"))
    assert final["dtype"] == resolve_dtype("auto")

    # Token counts: the engine's, as logged; the reply's raw text (without its sources line) re-tokenised (+1 for the end-of-turn token the
    # model generated and the text does not show) gives as many, or a few fewer where the model wrote a word in
    # more pieces than the tokenizer would (a greedy reply can); the prompt rendered again, exactly.
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    reply_text = [step["output"] for _, step in socket_events(page, "update_message")
                  if step["type"] == "assistant_message" and step["output"]][-1]
    reply_text = model_text(reply_text)
    finished_by_stop = demo_app.reply_stats()[-1].split(", ")[-2] == "stop"
    generated = int(final["generated_tokens"])
    assert generated == int(re.search(r"(\d+) generated", demo_app.reply_stats()[-1]).group(1))
    assert 0 <= generated - finished_by_stop - len(tokenizer.encode(reply_text)) <= 3
    persona = load_personas(ROOT / "prompts", "tour_guide")[0]
    knowledge = KnowledgeBase(tmp_path / "knowledge.db", OPERATORS, {"tour_guide": persona.knowledge})
    knowledge.sync_all(first=True)
    history = [{"role": "user", "content": question}]
    found = knowledge.search("tour_guide", history, 4096 // 3)
    prompt = tokenizer.apply_chat_template([{"role": "system", "content": persona.system_prompt + RULES},
                                            *grounded(history, found)], add_generation_prompt=True, return_dict=False)
    assert int(final["prompt_tokens"]) == len(prompt)

    # Decode speed within 10% of tokens over the time between the stream's first and last delta here.
    deltas = [at for at, event in socket_events(page, "stream_token") if event.get("token")]
    browser_rate = (int(final["generated_tokens"]) - 1 - finished_by_stop) / (deltas[-1] - deltas[0])
    assert abs(float(final["tokens_per_s"]) - browser_rate) <= 0.1 * browser_rate, (final, browser_rate)

    # Memory within 5% of the kernel's PSS of the app and its engine processes, read here.
    app_process = psutil.Process(demo_app.process.pid)
    app_pids = [app_process.pid] + [child.pid for child in app_process.children(recursive=True)]
    kernel_mib = sum(smaps_rollup_pss(pid) for pid in app_pids) / 2**20
    assert abs(int(final["app_memory_mib"]) - kernel_mib) <= 0.05 * kernel_mib, (final, kernel_mib)
    footer = page.locator('[data-stat="reply_footer"]').last.inner_text()
    assert footer.startswith(f"{final['generated_tokens']} tokens · {final['tokens_per_s']} tokens/s")
    page.screenshot(path=str(ARTIFACTS / "sidebar.png"))
    page.close()


def test_sidebar_costs_no_decode_speed(browser, demo_app):
    """The same greedy reply, in fresh chats with the sidebar off and on, twice each, in this one run."""
    speeds = {"off": [], "on": []}
    for sidebar in ("off", "on", "off", "on"):
        page = open_chat(browser, demo_app)
        set_option(page, "live_stats", sidebar == "on")
        ask_and_wait(page, "广州早茶有什么推荐？")
        line = demo_app.reply_stats()[-1]
        assert line.endswith(f"sidebar {sidebar}"), line
        speeds[sidebar].append(float(re.search(r"([\d.]+) tokens/s", line).group(1)))
        page.close()
    best = {state: max(values) for state, values in speeds.items()}
    (ARTIFACTS / "sidebar-cost.json").write_text(json.dumps({"decode_tokens_per_s": speeds, "best": best}))
    # The best of each: a shared machine only ever slows a reply (CI once saw 17.6 beside 27.4 with the sidebar on,
    # 35.8 and 30.1 off, failing a comparison of means), while a costly sidebar slows every reply it is on for.
    assert best["on"] >= 0.8 * best["off"], speeds  # generous: this only separates cheap from broken


def test_read_aloud_speaks_each_reply_in_its_language_without_the_sources_line(browser, demo_app):
    """Observed in the page: what the 朗读 button hands the browser's speech synthesis, for a Chinese and an English
    question about the guide: the reply's words, without the sources line or the marks under them."""
    page = open_chat(browser, demo_app, hear_speech())
    for number, (question, lang) in enumerate((("陈家祠在哪个区？", "zh-CN"), ("How tall is the Canton Tower?", "en-US"))):
        send(page, question)
        page.wait_for_selector(f"{REPLY} >> nth={number}", timeout=30_000)
        page.wait_for_selector("#chat-submit", timeout=WHOLE_REPLY)
        page.wait_for_selector(f"[data-read-aloud] >> nth={number}", timeout=10_000)
        reply = page.locator(REPLY).nth(number).inner_text()
        page.locator("[data-read-aloud]").nth(number).click()
        assert wait_until(lambda count=number + 1: page.evaluate("window.spoken.length") == count)
        spoken = page.evaluate("window.spoken")[number]
        assert spoken["lang"] == lang, (spoken, reply)
        marks = re.search(r"\n(📚|ℹ️)", reply)  # the sources line, or the mark of a reply no source backs
        # Words compared, not marks or numbers (a numbered list's are read, though the page draws them apart).
        said, shown = (re.sub(r"[^A-Za-z\u4e00-\u9fff]", "", text) for text in (spoken["text"], reply[:marks.start()]))
        assert said and said == shown and "source" not in spoken["text"].lower(), (spoken, reply)
    assert "📚 来源 Sources" in page.locator(REPLY).first.inner_text()  # the Chinese reply's, not read
    page.close()
