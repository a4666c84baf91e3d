"""The chat on a phone, in Chromium at 390×844 with touch and an iPhone's browser, driven by taps: nothing covers the
chat unless the visitor opens it (the live statistics, a source), and a tap asks, stops, opens and closes; a
conversation is resumed from the history list. On the real app and the scripted engine, with logins (history needs
them); screenshots go to the test artifacts (`docs/phone-*.png` are these, from a run).
"""

from __future__ import annotations

import re
import subprocess

import pytest

from harness.browser import PHONE, REPLY, hear_speech, open_chat, wait_until
from tests.fake_engine import QUOTE
from tests.support import ARTIFACTS, FakeApp, users_file

pytestmark = pytest.mark.e2e
LOGIN = ("alice", "alice-password")
REPLY_TOKENS = 300  # six seconds of the scripted engine: time to tap Stop
# Every sheet the page opens (Chainlit's side view is one on a small screen), counted as it appears.
COUNT_SHEETS = """
window.sheetsOpened = 0;
new MutationObserver(records => {
  for (const record of records)
    for (const node of record.addedNodes)
      if (node.nodeType === 1 && (node.matches('[role=dialog]') || node.querySelector('[role=dialog]')))
        window.sheetsOpened += 1;
}).observe(document, {subtree: true, childList: true});
"""
SHEET = "[role=dialog]"


@pytest.fixture(scope="module")
def phone_app(tmp_path_factory):
    state = tmp_path_factory.mktemp("phone-state")
    users_file(state, dict([LOGIN]))
    ARTIFACTS.mkdir(exist_ok=True)
    running = FakeApp(ARTIFACTS / "app-phone.log", CHAT_STATE_DIR=str(state), CHAT_USERS_FILE=str(state / "users.json"),
                      CHAT_MAX_NEW_TOKENS=str(REPLY_TOKENS))
    running.wait_until_ready(timeout=60)
    yield running
    running.stop()


def on_phone(browser, app):
    page = open_chat(browser, app, COUNT_SHEETS, login=LOGIN, **PHONE)
    page.wait_for_timeout(1000)  # the statistics would open once the chat has started
    return page


def ask(page, question: str) -> str:
    """Type a question and tap send; the reply as it ended."""
    page.fill("#chat-input", question)
    page.tap("#chat-submit")
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=60_000)
    page.wait_for_timeout(1000)  # what the page would open after a reply
    return page.locator(REPLY).last.inner_text()


def not_covered(page, selector: str) -> bool:
    """The middle of what shows of the last `selector` above the composer is what a finger there touches: nothing
    lies over it."""
    return page.evaluate("""selector => {
        const element = [...document.querySelectorAll(selector)].at(-1);
        const box = element.getBoundingClientRect();
        const composer = document.querySelector('#chat-input').getBoundingClientRect();
        const bottom = selector === '#chat-input' ? box.bottom : Math.min(box.bottom, composer.top - 40);
        const y = (Math.max(box.top, 0) + bottom) / 2;
        return element.contains(document.elementFromPoint(box.left + box.width / 2, y));
    }""", selector)


def close_sheet(page) -> None:
    page.locator(SHEET).get_by_role("button", name="Close").tap()
    page.wait_for_selector(SHEET, state="detached", timeout=5_000)


def test_a_tap_asks_nothing_covers_the_reply_and_the_statistics_open_with_a_tap(browser, phone_app):
    page = on_phone(browser, phone_app)
    assert page.evaluate("window.sheetsOpened") == 0  # the model has loaded: no statistics over the chat
    assert not_covered(page, "#chat-input")
    reply = ask(page, "广州有什么好玩的？")
    assert re.search(r"w1 w2 .* w\d+", reply)
    assert page.evaluate("window.sheetsOpened") == 0 and not_covered(page, REPLY)
    page.screenshot(path=str(ARTIFACTS / "phone-reply.png"))
    # The button's 📊 is drawn: by the system's emoji font, or where it has none (Debian here), by the app's own.
    loaded = page.evaluate("document.fonts.ready.then(() => [...document.fonts].filter(font => font.status === "
                           "'loaded').map(font => font.family.replaceAll('\"', '')))")
    system_emoji = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True).stdout
    assert "Noto Emoji" in loaded or "Emoji" in system_emoji, loaded
    page.locator("[data-show-stats]").last.tap()
    sheet = page.wait_for_selector(SHEET, timeout=10_000)
    assert "运行状态" in sheet.inner_text()
    page.wait_for_selector(f"{SHEET} [data-stat]", timeout=10_000)  # the figures, measured now
    generated = page.locator(f"{SHEET} [data-stat=generated_tokens]").inner_text()  # and the reply's, though the
    assert generated == page.locator("[data-stat=reply_footer]").last.inner_text().split()[0], generated  # sheet was shut
    page.wait_for_timeout(500)  # the sheet slides in
    page.screenshot(path=str(ARTIFACTS / "phone-stats.png"))
    close_sheet(page)
    assert not_covered(page, REPLY)
    page.close()


def test_a_narrow_touch_screen_that_says_it_is_a_desktop_is_not_covered_either(browser, phone_app):
    """An iPad in split view, a phone in "desktop site" mode: 390×844 with touch and a desktop browser's user agent.
    The page decides by its width, as its layout does (issue 52)."""
    desktop = {**PHONE, "user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                                      "Chrome/126.0 Safari/537.36"}
    page = open_chat(browser, phone_app, COUNT_SHEETS, login=LOGIN, **desktop)
    page.wait_for_timeout(1000)  # the statistics would open once the chat has started
    assert page.evaluate("window.sheetsOpened") == 0 and not_covered(page, "#chat-input")
    assert re.search(r"w1 w2 .* w\d+", ask(page, "广州有什么好玩的？"))  # a tap on send sent it
    assert page.evaluate("window.sheetsOpened") == 0 and not_covered(page, REPLY)
    page.close()


def test_a_tap_opens_a_source_and_a_tap_closes_it(browser, phone_app):
    page = on_phone(browser, phone_app)
    ask(page, f"{QUOTE} 陈家祠在哪个区？")
    page.wait_for_selector(f"{REPLY} a.element-link", timeout=10_000)
    assert page.evaluate("window.sheetsOpened") == 0 and not_covered(page, REPLY)  # the sources stay closed
    link = page.locator(f"{REPLY} a.element-link").first
    name = link.inner_text().split(" · ")[0]
    link.tap()
    sheet = page.wait_for_selector(SHEET, timeout=10_000)
    assert "陈家祠" in sheet.inner_text() and name, sheet.inner_text()[:200]
    page.wait_for_timeout(500)  # the sheet slides in
    page.screenshot(path=str(ARTIFACTS / "phone-source.png"))
    close_sheet(page)
    assert not_covered(page, REPLY)
    page.close()


def test_a_tap_on_stop_ends_the_reply(browser, phone_app):
    page = on_phone(browser, phone_app)
    page.fill("#chat-input", "讲讲白云山")
    page.tap("#chat-submit")
    page.wait_for_selector(f"{REPLY} >> text=w5", timeout=30_000)
    page.tap("#stop-button")
    page.wait_for_selector("#chat-submit", timeout=5_000)
    page.wait_for_timeout(1000)  # words already on the wire may still land
    words = page.locator(REPLY).last.inner_text()
    assert f"w{REPLY_TOKENS - 1}" not in words
    assert wait_until(lambda: "abort" in phone_app.reply_stats()[-1], timeout=5)
    page.close()


def test_a_conversation_resumed_from_the_history_list_is_not_covered(browser, phone_app):
    page = on_phone(browser, phone_app)
    ask(page, f"{QUOTE} 广州塔有多高？")  # a reply with sources, which the resumed chat shows again
    page.wait_for_timeout(1500)  # Chainlit stores the last reply in a task of its own
    page.close()
    page = on_phone(browser, phone_app)
    page.tap("#sidebar-trigger-button")
    page.locator("#thread-history [id^=thread-]", has_text="广州塔有多高").first.tap()
    page.wait_for_selector(f"{REPLY} a.element-link", timeout=30_000)
    page.wait_for_timeout(2000)  # the sources come back in a task after the thread
    assert page.locator(SHEET).count() == 0 and not_covered(page, REPLY)
    assert page.locator("#chat-input").is_enabled()
    page.screenshot(path=str(ARTIFACTS / "phone-resumed.png"))
    page.close()


def test_read_aloud_hands_the_browser_the_reply_without_its_marks_and_is_hidden_without_a_voice(browser, phone_app):
    page = open_chat(browser, phone_app, COUNT_SHEETS + hear_speech(), login=LOGIN, **PHONE)
    reply = ask(page, f"{QUOTE} 广州塔有多高？")
    button = page.locator("[data-read-aloud]").last
    button.tap()
    assert wait_until(lambda: page.evaluate("window.spoken.length") == 1)
    [spoken] = page.evaluate("window.spoken")
    assert spoken["lang"] == button.get_attribute("data-read-aloud")
    assert "广州塔有多高" in spoken["text"] and "Sources" not in spoken["text"] and "Sources" in reply
    page.close()
    page = open_chat(browser, phone_app, hear_speech(voices=()), login=LOGIN, **PHONE)
    ask(page, "你好")
    assert page.locator("[data-show-stats]").count() == 1 and page.locator("[data-read-aloud]").count() == 0
    page.close()
