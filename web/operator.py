"""The operator's page, `/operator`, and its downloads, `/operator/{unanswered,usage,documents,users}.{csv,json}`:
only for operators (`web.operator_check`); the changes the page makes to the guide are in `web.operator_edits`.

With logins on, an operator is a user the users file marks so (`python -m web.accounts add NAME --operator`), logged
in as for the chat. Without logins, the operator holds `CHAT_OPERATOR_TOKEN`: as an `Authorization: Bearer` header
(scripts), or opened once as `/operator?token=…`, which keeps it in a cookie for this page only and drops it from the
address. Anyone else gets 403 on every route, and 404 where the page is off (no logins and no token set); being on
this machine opens nothing, since a kiosk's visitors are on it too. The figures are built off the event loop, from
what is stored (`insights.report`), for the period the query names: `?days=7` (the default), or `?since=&until=`.

The door (`OperatorDoor`, in front of the CORS middleware): a request that another site's page sends (its `Origin` is
not the app's own) is refused, so no site, not even one allowed for the widget, reads the figures or changes
anything with an operator's cookie. Wrong tokens are counted per address: after `MAX_WRONG_TOKENS` within 15
minutes the address gets 429 until they age out. The token is taken from the address only on `/operator` itself
(then kept in a cookie, `Secure` behind HTTPS), so it never lands in a download's address or a proxy's log twice.
`POST /operator/sign-out` forgets it (and, with logins, the login).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import date
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from config.errors import HistoryError
from insights.report import KINDS, Report, as_csv, as_json
from insights.usage import period
from web.chainlit_patches import add_middleware, route_first
from web.gate import AUTH_COOKIE
from web.operator_check import COOKIE, OperatorCheck
from web.operator_edits import Editing
from web.operator_page import page

FORMATS = {"csv": ("text/csv; charset=utf-8", as_csv), "json": ("application/json", as_json)}
Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def is_operator_path(path: str) -> bool:
    return path == "/operator" or path.startswith("/operator/")


class OperatorDoor:
    """ASGI middleware: a request to the operator's routes from another site's page (an `Origin` other than the
    app's own address, `null` included) gets 403, without the CORS headers that would let that page read it."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_operator_path(scope["path"]):
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            if origin is not None and urlsplit(origin).netloc != headers.get("host"):
                body = json.dumps({"detail": "The operator's page answers its own pages only."}).encode()
                await send({"type": "http.response.start", "status": 403, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                return await send({"type": "http.response.body", "body": body})
        await self.app(scope, receive, send)


def add_operator_page(build: Callable[[date, date], Report], check: OperatorCheck, keep_days: int,
                      editing: Editing) -> None:
    """`build(since, until)`: the report of a period (its end excluded); `editing`: the routes that change the
    guide's documents (`web.operator_edits`)."""
    logins = check.logins
    refused = check.refused

    async def figures(request: Request) -> Report | Response:
        query = request.query_params
        try:
            since, until = period(int(query.get("days") or 7), query.get("since") or None, query.get("until") or None)
        except (HistoryError, ValueError) as error:
            return JSONResponse({"detail": f"{error} (?days=7, or ?since=2026-11-01&until=2026-12-01)"},
                                status_code=400)
        return await asyncio.to_thread(build, since, until)

    async def overview(request: Request) -> Response:
        if answer := refused(request):
            return answer
        if "token" in request.query_params:  # keep it out of the address bar and the history
            response = RedirectResponse("/operator", status_code=303)
            response.set_cookie(COOKIE, request.query_params["token"], httponly=True, samesite="strict",
                                path="/operator", secure=request.url.scheme == "https")
            return response
        report = await figures(request)
        if isinstance(report, Response):
            return report
        chosen = {key: value for key, value in request.query_params.items() if key in ("days", "since", "until")}
        english = request.headers.get("accept-language", "").lower().startswith("en")
        desk = await editing.desk(request, report)
        return HTMLResponse(page(report, chosen or {"days": "7"}, english, keep_days, logins is not None, desk),
                            headers={"cache-control": "no-store"})

    async def download(request: Request) -> Response:
        if answer := refused(request):
            return answer
        kind, _, form = request.path_params["name"].partition(".")
        if kind not in KINDS or form not in FORMATS or (kind == "users" and logins is None):
            return JSONResponse({"detail": f"No such download: {', '.join(f'{k}.csv' for k in KINDS)} (or .json)."},
                                status_code=404)
        report = await figures(request)
        if isinstance(report, Response):
            return report
        media, render = FORMATS[form]
        return Response(render(report, kind), media_type=media, headers={
            "content-disposition": f'attachment; filename="{kind}-{report.usage.since}-{report.usage.until}.{form}"',
            "cache-control": "no-store"})

    async def sign_out(request: Request) -> Response:
        response = RedirectResponse("/" if logins is not None else "/operator", status_code=303)
        response.delete_cookie(COOKIE, path="/operator", secure=request.url.scheme == "https", httponly=True,
                               samesite="strict")
        if logins is not None:  # the operator's login is the chat's: signing out of one is signing out of both
            response.delete_cookie(AUTH_COOKIE, path="/", httponly=True, samesite="lax")
        return response

    route_first(Route("/operator", overview),
                                     Route("/operator/sign-out", sign_out, methods=["POST"]),
                                     *editing.routes(figures), Route("/operator/{name}", download))
    add_middleware(OperatorDoor)
