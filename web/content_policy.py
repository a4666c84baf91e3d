"""What every response of the app tells the browser it may load: the `Content-Security-Policy` header.

A second wall behind the text checks of documents and replies: whatever Markdown a passage or a reply carries (an
image of a LAN address, a tracker), the browser fetches images, fonts, media and connections only from the app
itself. Scripts may be inline and compiled in the page (Chainlit's page has an inline script and compiles the app's
custom elements from their JSX in the browser); nothing else is allowed from anywhere. The widget runs on its host
site's page, under that site's policy, and takes its font from the app (`web.widget`). Knows nothing of the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from web.chainlit_patches import add_middleware

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

POLICY = "; ".join((
    "default-src 'self'",
    "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "media-src 'self' data: blob:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
))
HEADERS = [(b"content-security-policy", POLICY.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"same-origin")]


class ContentPolicy:
    """ASGI middleware: the policy's headers on every HTTP response that does not set them itself."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_policy(message: dict) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *(header for header in HEADERS if header[0] not in present)]}
            await send(message)

        await self.app(scope, receive, with_policy)


def apply_content_policy() -> None:
    add_middleware(ContentPolicy)
