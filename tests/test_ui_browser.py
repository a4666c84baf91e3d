"""The page as visitors see it, in Chromium: offline, Chinese first, branded, starters, settings, safe rendering.

Uses the shared app on the paced test model (greedy, 200 tokens); the safe-rendering test starts an app
on a tiny model that answers with HTML.
"""

from __future__ import annotations

import pytest

from harness.browser import REPLY, ask_and_wait, open_chat, send, socket_events, wait_until
from history.conversation import model_text
from tests.support import ARTIFACTS, RunningApp
from tests.tiny_model import build_tiny_qwen

pytestmark = pytest.mark.e2e

RICH_MESSAGE = "**加粗 bold** and `inline code`\n\n```python\nprint('你好')\n```\n\n$$E = mc^2$$"


def test_the_page_loads_and_chats_with_every_other_host_blocked(browser, app):
    requested, blocked, sockets = [], [], []

    def cut_off(page) -> None:
        def only_the_app(route) -> None:
            if route.request.url.startswith(app.url):
                route.continue_()
            else:
                blocked.append(route.request.url)
                route.abort()

        page.route("**/*", only_the_app)
        page.on("request", lambda request: requested.append(request.url))
        page.on("websocket", lambda socket: sockets.append(socket.url))

    page = open_chat(browser, app, before_load=cut_off)
    reply = ask_and_wait(page, RICH_MESSAGE)
    assert reply  # a chat completes
    user_message = page.locator('[data-step-type="user_message"]').last
    assert user_message.locator(".font-bold").inner_text() == "加粗 bold"  # markdown
    assert "print('你好')" in user_message.locator("pre code").inner_text()  # code block
    assert user_message.locator(".katex").count() == 1  # maths, typeset by KaTeX
    loaded_fonts = page.evaluate("""document.fonts.ready.then(() => [...document.fonts]
        .filter(font => font.status === 'loaded').map(font => font.family.replaceAll('"', '')))""")
    assert "Inter" in loaded_fonts and "KaTeX_Main" in loaded_fonts, loaded_fonts
    assert any("/public/vendor/katex/fonts/" in url for url in requested)
    assert blocked == [] and all(url.startswith(app.url) for url in requested)
    assert sockets and all(url.startswith(app.url.replace("http", "ws")) for url in sockets)
    page.close()


@pytest.mark.parametrize("locale, placeholder", [("zh-CN", "在此输入您的消息"), ("fr-FR", "在此输入您的消息"),
                                                  ("en-US", "Type your message here")])
def test_chinese_unless_the_browser_asks_for_english(browser, app, locale, placeholder):
    page = open_chat(browser, app, locale=locale)
    assert placeholder in page.locator("#chat-input").get_attribute("placeholder")
    page.close()


def test_name_logo_starters_and_avatar_of_the_tour_guide(browser, app):
    page = open_chat(browser, app)
    assert page.title() == "花城导游"
    for theme in ("light", "dark"):
        logo = page.request.get(f"{app.url}/logo?theme={theme}")
        assert logo.ok and "花城导游" in logo.text()
    assert page.locator("#upload-button").count() == 0  # no file upload
    for label in ("广州一日游路线", "早茶必点点心", "亲子游景点"):
        page.get_by_text(label).wait_for()
    page.get_by_text("早茶必点点心").click()
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=120_000)
    assert "广州早茶有哪些必点的点心？请简单介绍每一道。" in page.locator('[data-step-type="user_message"]').last.inner_text()
    avatar = page.locator('[data-step-type="assistant_message"] img').first.get_attribute("src")
    assert avatar.endswith("/public/avatars/tour_guide.svg")
    page.screenshot(path=str(ARTIFACTS / "starters.png"))
    page.close()


def test_settings_changed_mid_chat_apply_to_the_next_reply_and_keep_the_history(browser, app):
    page = open_chat(browser, app)
    ask_and_wait(page, "推荐三个广州的景点")
    assert "max 200 new tokens" in app.reply_stats()[-1]
    page.click("#chat-settings-open-modal")
    page.locator("#max_new_tokens [role=slider]").press("Home")  # the slider's lowest value
    page.click("#confirm")
    page.wait_for_selector("#confirm", state="detached")
    replies_before = len(app.reply_stats())
    ask_and_wait(page, "再推荐两个")
    assert wait_until(lambda: len(app.reply_stats()) > replies_before)
    line = app.reply_stats()[-1]
    assert "max 16 new tokens;" in line and "in 3 messages, 16 generated" in line, line
    assert page.locator(REPLY).count() == 2
    page.close()


PAYLOAD_IN_REPLY = '<img src=x onerror="window.__xss=(window.__xss||0)+1">'
PAYLOAD_IN_QUESTION = ('<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'
                       "[点我 click](javascript:window.__xss=1) <iframe src=\"javascript:window.__xss=1\"></iframe>")


@pytest.fixture(scope="module")
def html_app(tmp_path_factory):
    """An app whose model answers only with HTML: a tiny model that repeats one token, `PAYLOAD_IN_REPLY`."""
    model = build_tiny_qwen(tmp_path_factory.mktemp("models") / "html-qwen2", echo=PAYLOAD_IN_REPLY)
    running = RunningApp(model, ARTIFACTS / "app-html.log", CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="4")
    running.wait_until_ready()
    yield running
    running.stop()


def test_html_from_visitor_or_model_is_shown_as_text_and_never_runs(browser, html_app):
    page = open_chat(browser, html_app)
    send(page, PAYLOAD_IN_QUESTION)
    page.wait_for_selector(REPLY, timeout=30_000)
    page.wait_for_selector("#chat-submit", timeout=60_000)
    raw_reply = [step["output"] for _, step in socket_events(page, "update_message")
                 if step["type"] == "assistant_message" and step["output"]][-1]
    assert model_text(raw_reply) == PAYLOAD_IN_REPLY * 4  # the model did send HTML
    page.wait_for_timeout(1000)  # time for an image error handler to fire, were there an image
    assert page.evaluate("window.__xss") is None
    assert page.locator('img[src="x"], iframe, a[href^="javascript:"]').count() == 0
    assert page.locator("#root script").count() == 0
    assert PAYLOAD_IN_REPLY in page.locator(REPLY).last.inner_text()  # shown as text
    assert "<script>window.__xss=1</script>" in page.locator('[data-step-type="user_message"]').last.inner_text()
    page.close()
