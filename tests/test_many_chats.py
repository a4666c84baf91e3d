"""Many chats: eight at once, three turns each, in real browser sessions against `chainlit run` on the
tiny model. Every reply completes in its own session, the log stays clean, memory comes back.

Also measures aggregate decode throughput through the whole UI path for 1, 4 and 8 chats at once
(written to test-artifacts/load.json for the README and the closing note).
"""

from __future__ import annotations

import json
import time

import psutil
import pytest

from harness.browser import REPLY, launch_chromium, open_chat, send
from tests.support import ARTIFACTS, RunningApp, smaps_rollup_pss

pytestmark = pytest.mark.e2e
REPLY_TOKENS = 64


@pytest.fixture(scope="module")
def load_app(tiny_model_dir):
    with RunningApp(tiny_model_dir, ARTIFACTS / "app-load.log", CHAT_TEMPERATURE="0",
                    CHAT_MAX_NEW_TOKENS=str(REPLY_TOKENS), CHAT_MAX_MODEL_LEN="2048") as running:
        yield running


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


def app_pss(app: RunningApp) -> int:
    root = psutil.Process(app.process.pid)
    return sum(smaps_rollup_pss(process.pid) for process in [root, *root.children(recursive=True)])


def run_turn(pages, turn: int) -> float:
    """Send one question in every chat at once; wait for every reply; return the wall time."""
    started = time.monotonic()
    for index, page in enumerate(pages):
        send(page, f"第{turn}轮，第{index}位游客：请推荐广州的景点 {index}")
    for page in pages:
        page.wait_for_function(f"document.querySelectorAll('{REPLY}').length >= {turn}", timeout=120_000)
        page.wait_for_selector("#chat-submit", timeout=120_000)
    return time.monotonic() - started


def test_eight_chats_three_turns(chromium, load_app):
    throughput = {}
    for chats in (1, 4):  # warm-up rounds that also measure throughput at lower concurrency
        pages = [open_chat(chromium, load_app) for _ in range(chats)]
        throughput[chats] = chats * REPLY_TOKENS / run_turn(pages, 1)
        for page in pages:
            page.close()
    time.sleep(2)
    memory_before = app_pss(load_app)
    replies_before = len(load_app.reply_stats())

    pages = [open_chat(chromium, load_app) for _ in range(8)]
    for turn in (1, 2, 3):
        seconds = run_turn(pages, turn)
        if turn == 1:
            throughput[8] = 8 * REPLY_TOKENS / seconds

    lines = load_app.reply_stats()[replies_before:]
    assert len(lines) == 24 and all(", length," in line and f"{REPLY_TOKENS} generated" in line for line in lines)
    for turn in (1, 2, 3):  # each prompt held its own session's history: 1, 3, then 5 messages
        assert sum(f"in {2 * turn - 1} messages" in line for line in lines) == 8
    for index, page in enumerate(pages):
        questions = page.locator('[data-step-type="user_message"]').all_inner_texts()
        assert [text.strip() for text in questions] == [
            f"第{turn}轮，第{index}位游客：请推荐广州的景点 {index}" for turn in (1, 2, 3)]
        assert len([text for text in page.locator(REPLY).all_inner_texts() if text.strip()]) == 3
    third_turn = [page.locator(REPLY).last.inner_text() for page in pages]
    assert len(set(third_turn)) == 8  # eight different conversations, eight different replies
    log = load_app.log()
    assert "Traceback" not in log and " ERROR " not in log and "- ERROR -" not in log

    for page in pages:
        page.close()
    time.sleep(3)
    memory_after = app_pss(load_app)
    assert abs(memory_after - memory_before) <= 0.1 * memory_before, (memory_before, memory_after)
    (ARTIFACTS / "load.json").write_text(json.dumps({
        "aggregate_tokens_per_s_ui_path": {str(chats): round(rate, 1) for chats, rate in throughput.items()},
        "app_pss_mib": {"before": memory_before // 2**20, "after": memory_after // 2**20},
    }))
