"""In Chromium, on the app of `test_lan_neighbours.py`: a document whose images would make every visitor opening its
source fetch the author's addresses, and a reply that copies such Markdown; the browser fetches neither."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.browser import REPLY, open_chat
from tests.fake_engine import QUOTE
from tests.support import ARTIFACTS
from tests.test_lan_neighbours import lan_site

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from lan_site(tmp_path_factory, max_new_tokens=400)  # the document's passage, quoted whole


class Tracker(BaseHTTPRequestHandler):
    """An image server of the author's choosing: counts what visitors' browsers ask of it."""

    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        Tracker.asked.append(self.path)
        self.send_response(200)
        self.send_header("content-type", "image/png")
        self.end_headers()

    def log_message(self, *arguments) -> None:
        pass


def test_no_document_or_reply_makes_a_visitors_browser_fetch_another_address(site, browser):
    tracker = ThreadingHTTPServer(("127.0.0.9", 0), Tracker)
    threading.Thread(target=tracker.serve_forever, daemon=True).start()
    image = f"http://127.0.0.9:{tracker.server_address[1]}/reply.png"
    requested: list[str] = []
    page = open_chat(browser, site, before_load=lambda page: page.on("request", lambda r: requested.append(r.url)))
    try:
        page.fill("#chat-input", f"沙面的码头在哪里？{QUOTE} ![跟踪]({image})")  # the fake repeats it in its reply
        page.keyboard.press("Enter")
        page.wait_for_selector(f"{REPLY} >> text=来源 Sources", timeout=30_000)
        page.locator(REPLY).last.locator("a", has_text="沙面地图").first.click()
        page.wait_for_selector("text=沙面的码头在沙面南边", timeout=10_000)
        time.sleep(1)
        assert "地图 [新]" in page.inner_text("body") and "a]b" in page.inner_text("body")
        assert not [url for url in requested if "192.0.2." in url], requested
        assert Tracker.asked == []  # the reply's image was never fetched: the page's policy blocked it
        page.screenshot(path=str(ARTIFACTS / "no-outside-fetch.png"))
    finally:
        page.close()
        tracker.shutdown()
