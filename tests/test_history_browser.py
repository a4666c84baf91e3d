"""Conversations that last, against the real app and a real SQLite file, in a real browser: stored as they
happen, resumed with their context, persona and settings after the app restarts, rewound by an edit (stop
works there too), and exported. `tests/test_history_socket.py` has the rest, over the socket alone.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from config.personas import load_personas
from config.settings import PROJECT_ROOT
from harness.browser import REPLY, ask_and_wait, open_chat, set_option, socket_events, wait_until
from tests.support import ARTIFACTS, ROOT, RunningApp, rows, users_file

pytestmark = pytest.mark.e2e
PASSWORDS = {"alice": "alice-password", "bob": "bob-password"}
ASSISTANT_PROMPT = load_personas(PROJECT_ROOT / "prompts", "assistant")[0].system_prompt
# What the data layer logs when it loses or refuses something.
DATA_LAYER_TROUBLE = re.compile(r"An error occurred|An unexpected error|could not be saved|refused and dropped|"
                                r"create_element error|Reading the conversations' database failed")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A state folder with two users and the conversations' database, kept across restarts of the app."""
    state = tmp_path_factory.mktemp("state")
    users_file(state, PASSWORDS)
    return state


def start(site, model, log_name: str, **env: str) -> RunningApp:
    app = RunningApp(model, ARTIFACTS / log_name, CHAT_STATE_DIR=str(site), CHAT_USERS_FILE=str(site / "users.json"),
                     CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="40", **env)
    app.wait_until_ready()
    return app


def last_prompt(page) -> str:
    """The exact prompt of the latest reply, from the teaching view's step."""
    steps = [payload for _, payload in socket_events(page, "update_message")
             if payload.get("name") == "提示词 Prompt" and payload.get("output")]
    return steps[-1]["output"]


def choose_persona(page, display_name: str) -> None:
    page.click("#chat-profiles")
    page.click(f"[role=option]:has-text('{display_name}')")
    page.wait_for_timeout(1000)
    page.wait_for_selector("#chat-input:not([disabled])")


@pytest.fixture(scope="module")
def resumed(site, browser_for_module, paced_model_dir):
    """alice chats with the general assistant, teaching view on; the app restarts; she opens it again."""
    first = start(site, paced_model_dir, "app-history-1.log")
    page = open_chat(browser_for_module, first, login=("alice", PASSWORDS["alice"]))
    choose_persona(page, "通用助手")  # a new chat: the empty one before it is never stored
    chat_started = time.monotonic()
    set_option(page, "teaching", True)
    for question in ("第一个问题：广州在哪里？", "第二个问题：白云山有多高？"):
        ask_and_wait(page, question)
    time.sleep(1.5)  # Chainlit saves the last reply in a task of its own
    written = {payload["id"] for name in ("new_message", "update_message")
               for at, payload in socket_events(page, name) if at > chat_started}
    page.context.close()
    first.stop()
    second = start(site, paced_model_dir, "app-history-2.log")
    yield {"first": first, "second": second, "written": written}
    second.stop()


@pytest.fixture(scope="module")
def browser_for_module(playwright_driver):
    from harness.browser import launch_chromium

    chromium = launch_chromium(playwright_driver)
    yield chromium
    chromium.close()


def test_every_message_step_and_thread_is_stored_without_a_warning(site, resumed):
    threads = rows(site / "chat.db", 'SELECT "id", "userIdentifier", "tags", "metadata" FROM threads')
    assert len(threads) == 1 and threads[0][1] == "alice"
    assert json.loads(threads[0][2]) == ["assistant"]  # the profile's tag: a list, as JSON
    metadata = json.loads(threads[0][3])
    assert metadata["chat_profile"] == "assistant" and metadata["options"]["teaching"] is True
    stored = {row[0]: row[1:] for row in rows(site / "chat.db", 'SELECT "id", "type", "output", "metadata" FROM steps')}
    assert resumed["written"] <= set(stored)  # every message the page was sent is in the database
    questions = [output for kind, output, _ in stored.values() if kind == "user_message"]
    assert sorted(questions) == ["第一个问题：广州在哪里？", "第二个问题：白云山有多高？"]
    replies = [json.loads(meta)["reply"] for kind, _, meta in stored.values() if '"reply"' in (meta or "")]
    assert len(replies) == 2 and all(reply["generated_tokens"] == 40 for reply in replies)
    assert sum(kind == "tool" for kind, _, _ in stored.values()) == 2  # the teaching view's steps
    assert not DATA_LAYER_TROUBLE.search(resumed["first"].log())


def test_after_a_restart_the_conversation_resumes_with_its_context_persona_and_settings(site, resumed,
                                                                                    browser_for_module):
    page = open_chat(browser_for_module, resumed["second"], login=("alice", PASSWORDS["alice"]))
    page.click("#thread-history [id^=thread-]")  # alice's only conversation, in the history list
    page.wait_for_selector("text=第二个问题：白云山有多高？")
    page.wait_for_selector('[data-stat="app_memory_mib"]', timeout=30_000)  # the sidebar came back too
    page.wait_for_timeout(1000)
    ask_and_wait(page, "第三个问题：还有呢？")
    prompt = last_prompt(page)  # the teaching view is on: the stored setting came back
    assert ASSISTANT_PROMPT in prompt  # the persona came back
    assert prompt.index("第一个问题") < prompt.index("第二个问题") < prompt.index("第三个问题")
    assert prompt.count("<|im_start|>assistant") == 3  # two stored replies, and the one being written
    assert "⏳" not in prompt and "Task manually stopped" not in prompt
    page.screenshot(path=str(ARTIFACTS / "resumed.png"))
    page.context.close()


def test_editing_an_earlier_question_rewinds_the_conversation_and_stop_works_there(resumed, browser_for_module,
                                                                                   site):
    app = resumed["second"]
    page = open_chat(browser_for_module, app, login=("alice", PASSWORDS["alice"]))
    set_option(page, "teaching", True)
    for question in ("问题一", "问题二", "问题三"):
        ask_and_wait(page, question)
    first = page.locator('[data-step-type="user_message"]').first
    first.hover()
    first.locator("button").first.click()  # the pencil
    page.fill("#edit-chat-input", "问题一（改过）")
    replies_before = len(app.reply_stats())
    page.click(".confirm-edit")
    page.wait_for_selector("#stop-button", timeout=30_000)
    page.wait_for_selector(REPLY, timeout=30_000)
    page.locator("#stop-button").dispatch_event("click")  # stop reaches an edited question's run
    assert wait_until(lambda: len(app.reply_stats()) > replies_before, timeout=15)
    assert ", abort," in app.reply_stats()[-1] and "in 1 messages" in app.reply_stats()[-1]
    prompt = last_prompt(page)
    assert "问题一（改过）" in prompt and "问题二" not in prompt and "问题三" not in prompt
    page.wait_for_selector("#chat-submit", timeout=15_000)
    ask_and_wait(page, "问题四")
    prompt = last_prompt(page)
    assert prompt.index("问题一（改过）") < prompt.index("问题四") and "问题二" not in prompt
    assert prompt.count("<|im_start|>assistant") == 2  # the edited question's (stopped) reply, and this one
    time.sleep(1.5)
    stored = [row[0] for row in rows(site / "chat.db", 'SELECT "output" FROM steps WHERE "type" = \'user_message\' '
                                           'ORDER BY "createdAt"')]
    assert "问题二" not in stored and "问题三" not in stored and stored[-2:] == ["问题一（改过）", "问题四"]
    page.context.close()


def test_the_export_holds_the_conversations_in_order(site, resumed, tmp_path):
    done = subprocess.run([sys.executable, "-m", "history.export", "--user", "alice", "--out", str(tmp_path / "alice")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "CHAT_STATE_DIR": str(site)})
    assert done.returncode == 0, done.stderr
    records = json.loads((tmp_path / "alice.json").read_text(encoding="utf-8"))
    first = next(record for record in records if record["messages"][0]["content"].startswith("第一个问题"))
    assert [message["role"] for message in first["messages"]] == ["user", "assistant"] * 3
    assert [message["content"] for message in first["messages"][::2]] == [
        "第一个问题：广州在哪里？", "第二个问题：白云山有多高？", "第三个问题：还有呢？"]
    markdown = (tmp_path / "alice.md").read_text(encoding="utf-8")
    assert markdown.index("第一个问题") < markdown.index("第二个问题") < markdown.index("第三个问题")
