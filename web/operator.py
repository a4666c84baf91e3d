"""The operator's page, `/operator`, and its downloads, `/operator/{unanswered,usage,documents,users}.{csv,json}`:
only for operators.

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
import math
import secrets
from collections.abc import Awaitable, Callable
from datetime import date
from urllib.parse import urlsplit

import chainlit.server as server
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from config.errors import HistoryError
from insights.report import KINDS, Report, as_csv, as_json
from insights.usage import period
from web.auth import Logins, LoginThrottle, network_of
from web.gate import AUTH_COOKIE, login_token
from web.operator_page import page

COOKIE = "operator_token"
FORMATS = {"csv": ("text/csv; charset=utf-8", as_csv), "json": ("application/json", as_json)}
MAX_WRONG_TOKENS = 5  # per address within the throttle's window (15 minutes)
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


def add_operator_page(build: Callable[[date, date], Report], token: str, logins: Logins | None,
                      keep_days: int) -> None:
    """`build(since, until)`: the report of a period (its end excluded)."""
    wrong_tokens = LoginThrottle(MAX_WRONG_TOKENS, LoginThrottle.WINDOW)

    def refused(request: Request) -> Response | None:
        """None for an operator, else the answer that says why not."""
        if logins is not None and (name := logins.session_user(login_token(request.headers))):
            if logins.users.is_operator(name):  # logged in: the password was throttled at the login
                return None
        keys = [f"operator:{network_of(request.client.host if request.client else 'unknown')}"]
        if wait := wrong_tokens.locked_for(keys):
            return JSONResponse({"detail": "Too many wrong operator tokens from this address: try again later."},
                                status_code=429, headers={"retry-after": str(math.ceil(wait))})
        given = [request.cookies.get(COOKIE, "")]
        given += [request.query_params.get("token", "")] if request.url.path == "/operator" else []
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        given += [bearer.strip()] if scheme.lower() == "bearer" else []
        given = [value for value in given if value]
        if token and any(secrets.compare_digest(value.encode(), token.encode()) for value in given if value.isascii()):
            return None
        if logins is None and not token:
            return JSONResponse({"detail": "The operator's page is off: set CHAT_OPERATOR_TOKEN, or turn logins on "
                                           "and add an operator (docs/operators.md)."}, status_code=404)
        if token and given:  # a wrong operator token
            wrong_tokens.failed(keys)
        return JSONResponse({"detail": "只对运营者开放。Only for operators: log in as one (python -m web.accounts add "
                                       "NAME --operator), or send the CHAT_OPERATOR_TOKEN bearer token."},
                            status_code=403)

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
        return HTMLResponse(page(report, chosen or {"days": "7"}, english, keep_days, logins is not None),
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

    server.app.router.routes[0:0] = [Route("/operator", overview), Route("/operator/sign-out", sign_out,
                                                                         methods=["POST"]),
                                     Route("/operator/{name}", download)]
    server.app.add_middleware(OperatorDoor)
