"""End to end in Chromium, each test on an app of its own: low memory, the line of replies, a dead engine rebuilt,
a thinking model's thought, and stopping the app (Ctrl-C, SIGTERM) leaving no engine process behind.
"""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import psutil
import pytest

from harness.browser import REPLY, ask_and_wait, open_chat, send, set_option, socket_events, wait_until
from tests.support import ARTIFACTS, RunningApp

pytestmark = pytest.mark.e2e

def test_low_memory_refuses_new_replies_with_a_message(browser, tiny_model_dir):
    # A threshold above this machine's memory: the guard must refuse, say why, and warn in the sidebar.
    running = RunningApp(tiny_model_dir, ARTIFACTS / "app-low-memory.log", CHAT_MIN_AVAILABLE_GIB="100000")
    running.wait_until_ready()
    try:
        page = open_chat(browser, running)
        send(page, "你好")
        page.wait_for_selector("text=服务器内存不足", timeout=30_000)
        page.wait_for_selector('[data-stat="memory_warning"]', timeout=10_000)
        assert not running.reply_stats()  # no request reached the engine
        page.close()
    finally:
        running.stop()


def test_replies_beyond_the_limit_wait_in_line_and_see_their_place(browser, paced_model_dir):
    running = RunningApp(paced_model_dir, ARTIFACTS / "app-queue.log", CHAT_MAX_CONCURRENT_REPLIES="1",
                         CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="100")
    running.wait_until_ready()
    try:
        first, second = open_chat(browser, running), open_chat(browser, running)
        send(first, "广州早茶吃什么")
        first.wait_for_selector(REPLY, timeout=30_000)
        send(second, "What is the Canton Tower?")
        second.wait_for_selector("text=Waiting: number 1 in line", timeout=10_000)
        assert "aborted" not in running.log() and len(running.reply_stats()) == 0  # the first is still going
        for page in (first, second):
            page.wait_for_selector(REPLY, timeout=60_000)
            page.wait_for_selector("#chat-submit", timeout=60_000)
        assert second.locator("text=in line").count() == 0  # the notice left when the turn came
        texts = [page.locator(REPLY).last.inner_text() for page in (first, second)]
        assert all(texts) and texts[0] != texts[1]
        stats = running.reply_stats()
        assert len(stats) == 2 and all(", length," in line for line in stats)  # both complete, one after the other
    finally:
        running.stop()


def test_ctrl_c_leaves_no_engine_process(tiny_model_dir):
    running = RunningApp(tiny_model_dir, ARTIFACTS / "app-shutdown.log")
    running.wait_until_ready()
    engine_pids = [proc.pid for proc in running.engine_processes()]
    assert engine_pids
    running.stop()
    time.sleep(1)
    assert wait_until(lambda: not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                                 for pid in engine_pids), timeout=10)


def health(app) -> tuple[int, str]:
    answer = httpx.get(f"{app.url}/healthz", timeout=10)
    return answer.status_code, answer.json()["status"]


def test_a_dead_engine_is_reported_and_rebuilt(browser, paced_model_dir):
    running = RunningApp(paced_model_dir, ARTIFACTS / "app-engine-fault.log", CHAT_TEMPERATURE="0",
                         CHAT_MAX_NEW_TOKENS="100")
    running.wait_until_ready()
    try:
        page = open_chat(browser, running)
        send(page, "推荐三个广州的景点")
        page.wait_for_selector(REPLY, timeout=30_000)
        assert health(running) == (200, "ready")
        core = next(proc for proc in running.engine_processes() if "EngineCore" in " ".join(proc.cmdline()))
        core.kill()  # what the kernel's out-of-memory killer does to the process that holds the model
        page.wait_for_selector("text=正在自动重启", timeout=15_000)  # the visitor is told, no endless spinner
        assert wait_until(lambda: health(running) == (503, "restarting"), timeout=15)  # monitoring sees it too
        page.wait_for_selector("#chat-submit", timeout=15_000)
        assert wait_until(lambda: running.log().count("Engine ready") == 2, timeout=120)
        assert health(running) == (200, "ready")
        send(page, "你好")  # the same chat goes on with the rebuilt engine
        assert wait_until(lambda: running.reply_stats() and ", length," in running.reply_stats()[-1], timeout=60)
        assert running.process.poll() is None
        metrics = httpx.get(f"{running.url}/metrics").text
        assert "chat_engine_restarts_total 1.0" in metrics and 'chat_replies_total{ended="error"} 1.0' in metrics
        assert len([proc for proc in running.engine_processes() if "EngineCore" in " ".join(proc.cmdline())]) == 1
        page.close()
    finally:
        running.stop()


@pytest.mark.parametrize("how", ["SIGTERM to the app", "Ctrl-C in its terminal"])
def test_stopping_while_a_reply_streams_leaves_no_engine_process(browser, paced_model_dir, how):
    running = RunningApp(paced_model_dir, ARTIFACTS / "app-signal.log", CHAT_TEMPERATURE="0")
    running.wait_until_ready()
    page = open_chat(browser, running)
    send(page, "推荐三个广州的景点")
    page.wait_for_selector(REPLY, timeout=30_000)
    engine_pids = [proc.pid for proc in running.engine_processes()]
    if how.startswith("SIGTERM"):
        os.kill(running.process.pid, signal.SIGTERM)  # what a supervisor (systemd, docker stop) sends
    else:
        os.killpg(running.process.pid, signal.SIGINT)  # a terminal sends Ctrl-C to the whole group
    stopped = time.monotonic()
    assert wait_until(lambda: not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                                 for pid in engine_pids), timeout=10)
    assert running.process.wait(timeout=10) is not None and time.monotonic() - stopped < 10
    page.close()


def test_a_thinking_models_thought_is_a_collapsed_step_and_stays_out_of_the_next_prompt(browser, tmp_path):
    """The tiny Qwen3 thinker (`tests/tiny_model.build_tiny_thinker`) with the chat's thinking switch on."""
    from tests.tiny_model import build_tiny_thinker

    model = build_tiny_thinker(tmp_path / "thinker")
    script = json.loads((model / "script.json").read_text())
    running = RunningApp(model, ARTIFACTS / "app-thinker.log", CHAT_TEMPERATURE="0", CHAT_MAX_MODEL_LEN="2048")
    try:
        running.wait_until_ready()
        page = open_chat(browser, running)
        set_option(page, "thinking", True)
        set_option(page, "teaching", True)
        # Without passages: on 2,048 tokens of context the tiny model's tokenizer would give them the room of the
        # earlier turn this test looks for in the next prompt.
        set_option(page, "knowledge", False)
        assert ask_and_wait(page, "你好").startswith(script["answer"] + "\n")  # then its footer
        thought = page.get_by_text("思考过程 Thinking").first
        thought.wait_for()
        outside_token_views = ("() => { const page = document.body.cloneNode(true); "
                               "page.querySelectorAll('[data-token-view]').forEach(view => view.remove()); "
                               "return page.innerText; }")  # the teaching view's tokens hold the thought too
        assert script["thinking"][:12] not in page.evaluate(outside_token_views)  # collapsed once the answer came
        thought.click()
        page.wait_for_selector(f"text={script['thinking'][:12]}", timeout=10_000)
        page.wait_for_timeout(500)  # the step opens with an animation
        page.screenshot(path=str(ARTIFACTS / "thinking.png"))
        ask_and_wait(page, "还有呢？")
        prompt = [step for _, step in socket_events(page, "update_message") if step["name"] == "提示词 Prompt"][-1]
        assert script["answer"] in prompt["output"] and script["thinking"][:12] not in prompt["output"]
        page.close()
    finally:
        running.stop()
