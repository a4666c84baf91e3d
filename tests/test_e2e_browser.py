"""End to end: `chainlit run app.py`, driven by Playwright in Debian's Chromium.

One app on the paced test model serves most tests here (session fixture `app`); the demo model's test
and the shutdown test start their own.
"""

from __future__ import annotations

import re
import time

import psutil
import pytest

from tests.conftest import ARTIFACTS, CHROMIUM_ARGS, RunningApp

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def playwright_driver():
    # Module scope: Playwright's sync API keeps an event loop running, which the asyncio tests of
    # other modules must not find.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture
def browser(playwright_driver):
    """A fresh Chromium per test, so one test's page cannot slow the next one down."""
    chromium = playwright_driver.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


REPLY = '[data-step-type="assistant_message"] .message-content'


def open_chat(browser, app, init_script: str | None = None):
    """A new page with the chat loaded and its socket connected (a message sent before is lost)."""
    page = browser.new_page(locale="zh-CN")
    if init_script:
        page.add_init_script(init_script)
    frames: list[str] = []
    page.on("websocket", lambda socket: socket.on("framereceived", lambda frame: frames.append(str(frame))))
    page.goto(app.url)

    def chat_started() -> bool:  # the server ran on_chat_start for this socket and ended that task
        starts = [index for index, frame in enumerate(frames) if '"name":"on_chat_start"' in frame]
        return bool(starts) and any("task_end" in frame for frame in frames[starts[0]:])

    deadline = time.monotonic() + 60
    while not chat_started():
        assert time.monotonic() < deadline, "the chat session did not start"
        page.wait_for_timeout(100)
    page.wait_for_selector("#chat-input:not([disabled])", timeout=60_000)
    return page


def send(page, text: str) -> None:
    page.fill("#chat-input", text)
    page.click("#chat-submit")


RECORD_REPLY_LENGTHS = """
window.replyLengths = [];
new MutationObserver(() => {
    const replies = document.querySelectorAll('%s');
    if (replies.length) {
        const length = replies[replies.length - 1].innerText.length;
        if (length !== window.replyLengths.at(-1)) window.replyLengths.push(length);
    }
}).observe(document, {subtree: true, childList: true, characterData: true});
""" % REPLY


def test_reply_streams_into_the_page(browser, app):
    page = open_chat(browser, app, RECORD_REPLY_LENGTHS)
    send(page, "推荐三个广州的景点")
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=120_000)  # the send button returns when the reply ends
    text = page.locator(REPLY).last.inner_text()
    lengths = page.evaluate("window.replyLengths")
    # The reply grew in the page step by step (streamed), rather than appearing whole at the end.
    assert len(lengths) >= 5 and lengths[0] < len(text) / 2 and lengths[-1] == len(text), lengths
    assert len(text) > 50
    assert not re.search(r"<\|im_(start|end)\|>|<\|endoftext\|>", text)
    page.screenshot(path=str(ARTIFACTS / "chat.png"))
    page.close()


def press_stop(page) -> None:
    # A click event on the button itself: Playwright's pointer click first waits for two steady
    # animation frames, which a page re-rendering a 300 tokens/s stream on two cores may not give.
    page.locator("#stop-button").dispatch_event("click")


def test_stop_keeps_the_partial_reply(browser, app):
    page = open_chat(browser, app)
    send(page, "你好")
    page.wait_for_selector(REPLY, timeout=30_000)
    press_stop(page)
    page.wait_for_selector("#chat-submit", timeout=5_000)
    assert _wait(lambda: "abort" in app.reply_stats()[-1], timeout=5)
    stopped_line = app.reply_stats()[-1]
    assert int(re.search(r"(\d+) generated", stopped_line).group(1)) < 200  # stopped before its budget
    time.sleep(1.0)  # tokens already on the wire when stop was pressed may still land
    partial = page.locator(REPLY).first.inner_text()
    time.sleep(2.0)
    assert page.locator(REPLY).first.inner_text() == partial != ""  # nothing more arrives, text stays
    # The next prompt holds the stopped reply: user, partial assistant reply, user.
    send(page, "继续")
    page.wait_for_selector("#stop-button", timeout=10_000)
    press_stop(page)
    assert _wait(lambda: app.reply_stats()[-1] != stopped_line)
    assert "in 3 messages" in app.reply_stats()[-1]
    page.close()


def test_two_sessions_share_one_engine(browser, app):
    pages = [open_chat(browser, app) for _ in range(2)]
    for page, question in zip(pages, ("广州早茶吃什么", "What is the Canton Tower?")):
        send(page, question)
    for page in pages:
        page.wait_for_selector(REPLY, timeout=30_000)
        page.wait_for_selector("#chat-submit", timeout=120_000)
    texts = [page.locator(REPLY).last.inner_text() for page in pages]
    assert all(texts) and texts[0] != texts[1]  # each session got the reply to its own question
    cores = [proc for proc in app.engine_processes() if "EngineCore" in " ".join(proc.cmdline())]
    assert len(cores) == 1
    assert app.log().count("Engine ready") == 1
    for page in pages:
        page.close()


@pytest.fixture(scope="module")
def demo_app(demo_model_dir):
    """The app as a new user runs it: no CHAT_MODEL, so the bundled demo model; greedy for a fixed answer."""
    running = RunningApp("", ARTIFACTS / "app-demo.log", CHAT_TEMPERATURE="0")
    running.wait_until_ready()
    yield running
    running.stop()


def test_demo_model_answers_the_tour_guide_in_chinese(browser, demo_app):
    question = "推荐三个广州的景点"
    page = open_chat(browser, demo_app)
    send(page, question)
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=120_000)
    text = page.locator(REPLY).last.inner_text()
    assert "Qwen2.5-Coder-0.5B-Instruct" in demo_app.log()
    assert len(re.findall(r"[\u4e00-\u9fff]", text.replace(question, ""))) >= 30, text
    assert not re.search(r"<\|[a-z_]+\|>", text), text
    page.screenshot(path=str(ARTIFACTS / "demo-chat.png"))
    page.close()


def test_ctrl_c_leaves_no_engine_process(tiny_model_dir):
    running = RunningApp(tiny_model_dir, ARTIFACTS / "app-shutdown.log")
    running.wait_until_ready()
    engine_pids = [proc.pid for proc in running.engine_processes()]
    assert engine_pids
    running.stop()
    time.sleep(1)
    assert _wait(lambda: not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                                 for pid in engine_pids), timeout=10)


def _wait(condition, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
