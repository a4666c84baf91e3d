"""Chinese first: the page is in Chinese unless the browser asks for English (or another Chinese).

Chainlit picks its translation and welcome page (`chainlit_<language>.md`) by the language the browser
sends with `/project/translations` and `/project/settings`, and falls back to English. Here every language
but English and Chinese is answered in Simplified Chinese instead.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

import chainlit.server as server

DEFAULT = "zh-CN"
KEPT = ("en", "zh")
PATHS = ("/project/translations", "/project/settings")


def chinese_first() -> None:
    @server.app.middleware("http")
    async def prefer_chinese(request, call_next):
        if request.url.path.endswith(PATHS):
            query = dict(parse_qsl(request.scope["query_string"].decode()))
            if not query.get("language", "").lower().startswith(KEPT):
                query["language"] = DEFAULT
                request.scope["query_string"] = urlencode(query).encode()
        return await call_next(request)
