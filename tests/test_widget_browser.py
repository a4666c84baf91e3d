"""The guide inside another site: the sample host page (`deploy/widget/index.html`), served from other origins than
the app's, embeds Chainlit's widget from the app in Chromium. From an origin in CHAT_ALLOWED_ORIGINS the widget opens
with the persona whose file names that site (here the tour guide, while the app's own page opens the general
assistant) and a grounded reply streams with its sources; from an origin not listed it gets nothing.
On the real app and the scripted engine, without logins.
"""

from __future__ import annotations

import functools
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.app_process import free_port
from harness.browser import REPLY, open_chat, wait_until
from tests.fake_engine import QUOTE
from tests.support import ARTIFACTS, ROOT, FakeApp

pytestmark = pytest.mark.e2e
BUTTON = "#chainlit-copilot-button"


@pytest.fixture(scope="module")
def host_folders(tmp_path_factory):
    return [tmp_path_factory.mktemp(f"host-site-{number}") for number in range(2)]


@pytest.fixture(scope="module")
def host_sites(host_folders):
    """Two origins of their own, for the sample host page: (allowed, not allowed)."""
    servers = []
    for folder in host_folders:
        handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
        server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    yield [f"http://127.0.0.1:{server.server_address[1]}" for server in servers]
    for server in servers:
        server.shutdown()


@pytest.fixture(scope="module")
def widget_app(host_sites, host_folders, tmp_path_factory):
    """The general assistant by default; the tour guide's file names the allowed host site."""
    allowed, _ = host_sites
    prompts = tmp_path_factory.mktemp("prompts")
    for persona in (ROOT / "prompts").glob("*.toml"):
        shutil.copy(persona, prompts)
    guide = prompts / "tour_guide.toml"
    guide.write_text(f'widget_origins = ["{allowed}"]\n' + guide.read_text(encoding="utf-8"), encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    running = FakeApp(ARTIFACTS / "app-widget.log", CHAT_ALLOWED_ORIGINS=allowed, CHAT_PROMPTS_DIR=str(prompts),
                      CHAT_PERSONA="assistant", CHAT_MAX_NEW_TOKENS="100")
    running.wait_until_ready(timeout=60)
    sample = (ROOT / "deploy" / "widget" / "index.html").read_text(encoding="utf-8")
    assert 'const APP = "http://localhost:8000";' in sample
    for folder in host_folders:  # each site writes the app's address into its page, as the sample says
        (folder / "index.html").write_text(sample.replace("http://localhost:8000", running.url), encoding="utf-8")
    yield running
    running.stop()


def host_page(browser, site: str, requested: list[str]):
    page = browser.new_page(locale="zh-CN")
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{site}/?app=http://192.0.2.66:8000")  # the page's own query no longer names the script's address
    return page


def test_a_host_site_named_by_the_operator_embeds_the_guide_and_gets_a_grounded_reply(browser, widget_app, host_sites):
    allowed, _ = host_sites
    requested: list[str] = []
    page = host_page(browser, allowed, requested)
    page.locator(BUTTON).click()
    page.wait_for_selector("#chat-input:not([disabled])", timeout=30_000)
    assert wait_until(lambda: f"Widget chat from {allowed}: persona tour_guide" in widget_app.log(), timeout=30)
    page.wait_for_timeout(1000)  # the chat's start ends (a message sent before is lost)
    page.fill("#chat-input", f"{QUOTE} 陈家祠在哪个区？")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{REPLY} >> text=来源 Sources", timeout=30_000)
    assert "陈家祠" in page.locator(REPLY).last.inner_text()
    assert page.locator("#chat-profiles").count() == 0  # the site's own guide, no other to switch to
    assert page.locator("[data-stat]:not([data-stat=reply_footer])").count() == 0  # no statistics over the chat
    page.screenshot(path=str(ARTIFACTS / "widget.png"))
    assert f"{widget_app.url}/public/vendor/inter/inter.css" in requested  # its font from the app, not from Google
    assert not [url for url in requested if not url.startswith((widget_app.url, allowed))], requested
    page.close()
    own = open_chat(browser, widget_app)  # the app's own page still works, with its own default persona
    assert own.locator("#chat-profiles").inner_text().strip() == "通用助手"
    own.close()


def test_a_host_site_not_named_gets_nothing(browser, widget_app, host_sites):
    _, other = host_sites
    page = browser.new_page(locale="zh-CN")
    refused = []
    page.on("requestfailed", lambda request: refused.append(request.url))
    page.goto(f"{other}/")
    page.wait_for_timeout(3000)
    if page.locator(BUTTON).count():
        page.locator(BUTTON).click()
        page.wait_for_timeout(3000)
    assert page.locator("#chat-input").count() == 0 and page.locator(REPLY).count() == 0
    assert any(url.startswith(f"{widget_app.url}/auth/config") for url in refused), refused  # CORS refused it
    assert f"Widget chat from {other}" not in widget_app.log()  # and no chat started
    page.close()
