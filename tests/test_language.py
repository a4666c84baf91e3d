"""Chinese first (`web.language`): the language asked of Chainlit's routes, and a browser leaving mid-request."""

import asyncio

import pytest

from web.language import ChineseFirst, chinese_unless_asked

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("asked, answered", [
    ("language=fr-FR", "language=zh-CN"), ("", "language=zh-CN"), ("language=en-US", "language=en-US"),
    ("language=zh-TW", "language=zh-TW"), ("a=1&language=de", "a=1&language=zh-CN"),
])
def test_every_language_but_english_and_chinese_becomes_simplified_chinese(asked, answered):
    assert chinese_unless_asked(asked.encode()) == answered.encode()


def run(middleware, path, query):
    seen, sent = {}, []

    async def app(scope, receive, send):  # like a route whose client left: it reads the disconnect, answers nothing
        seen["query"] = scope["query_string"]
        assert (await receive())["type"] == "http.disconnect"

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": path, "query_string": query, "method": "GET", "headers": []}
    asyncio.run(middleware(app)(scope, receive, send))
    return seen["query"], sent


def test_a_browser_that_leaves_mid_request_ends_it_quietly():
    """Starlette's BaseHTTPMiddleware raised "No response returned." here (CI: a closed tab logged a traceback)."""
    assert run(ChineseFirst, "/project/settings", b"language=fr") == (b"language=zh-CN", [])
    assert run(ChineseFirst, "/other", b"language=fr") == (b"language=fr", [])
