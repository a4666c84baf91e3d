"""Chinese first: the page is in Chinese unless the browser asks for English (or another Chinese).

Chainlit picks its translation and welcome page (`chainlit_<language>.md`) by the language the browser
sends with `/project/translations` and `/project/settings`, and falls back to English. Here every language
but English and Chinese is answered in Simplified Chinese instead.

A plain ASGI middleware: it changes the request's query and nothing else, so a browser that leaves in the middle of
a request (a closed tab) ends that request quietly, as it would without it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from web.chainlit_patches import add_middleware

DEFAULT = "zh-CN"
KEPT = ("en", "zh")
PATHS = ("/project/translations", "/project/settings")


def chinese_unless_asked(query_string: bytes) -> bytes:
    """The query with `language` set to Simplified Chinese unless it asks for English or Chinese."""
    query = dict(parse_qsl(query_string.decode()))
    if query.get("language", "").lower().startswith(KEPT):
        return query_string
    return urlencode({**query, "language": DEFAULT}).encode()


class ChineseFirst:
    """ASGI middleware: the language asked of Chainlit's translation and settings routes, Chinese first."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].endswith(PATHS):
            scope = {**scope, "query_string": chinese_unless_asked(scope["query_string"])}
        await self.app(scope, receive, send)


def chinese_first() -> None:
    add_middleware(ChineseFirst)
