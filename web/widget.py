"""The guide inside another site: Chainlit's widget (`/copilot/index.js`, served by Chainlit) on the pages of the
origins in CHAT_ALLOWED_ORIGINS (`web.gate.restrict_origins` lets only those call the app), with the persona whose
file names that site in `widget_origins`.

The widget takes its font from the app, not from Google Fonts (which it asks otherwise: offline that fails, online it
tells a third party who visits): it reads the app's `/public/theme.json` and loads the stylesheets its `custom_fonts`
name, here the app's own Inter at the app's own address (`serve_widget_font`).

The widget asks `/project/settings` for the chat profiles before it opens a chat: `remember_origins` keeps the
Origin of each HTTP request (`request_origin`), so that the profiles offered to a host site that has a persona of
its own are that persona alone (the widget then shows no switch). A chat tells the widget's socket by its client
type (`chat.session.widget_origin`).
"""

from __future__ import annotations

from contextvars import ContextVar

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from web.chainlit_patches import add_middleware, route_first

FONT = "public/vendor/inter/inter.css"  # Inter, as Chainlit's page and widget use it, served by the app

_REQUEST_ORIGIN: ContextVar[str] = ContextVar("request_origin", default="")


class _RememberOrigin:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            _REQUEST_ORIGIN.set(Headers(scope=scope).get("origin", ""))
        await self.app(scope, receive, send)


def remember_origins() -> None:
    add_middleware(_RememberOrigin)


def request_origin() -> str:
    """The Origin of the HTTP request being answered ("" for a page's own, same-origin requests)."""
    return _REQUEST_ORIGIN.get()


def serve_widget_font() -> None:
    """`GET /public/theme.json`: the app's font, by the address the widget reached the app at (in front of Chainlit's
    `/public` route, which would answer 404: the app has no theme file)."""
    async def theme(request: Request) -> Response:
        return JSONResponse({"custom_fonts": [f"{request.base_url}{FONT}"]})

    route_first(Route("/public/theme.json", theme))
