"""The operator's page, `/operator`, and its downloads, `/operator/{unanswered,usage,documents,users}.{csv,json}`:
only for operators.

With logins on, an operator is a user the users file marks so (`python -m web.accounts add NAME --operator`), logged
in as for the chat. Without logins, the operator holds `CHAT_OPERATOR_TOKEN`: as an `Authorization: Bearer` header
(scripts), or opened once as `/operator?token=…`, which keeps it in a cookie for this page only and drops it from the
address. Anyone else gets 403 on every route, and 404 where the page is off (no logins and no token set); being on
this machine opens nothing, since a kiosk's visitors are on it too. The figures are built off the event loop, from
what is stored (`insights.report`), for the period the query names: `?days=7` (the default), or `?since=&until=`.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from datetime import date

import chainlit.server as server
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from config.errors import HistoryError
from insights.report import KINDS, Report, as_csv, as_json
from insights.usage import period
from web.auth import Logins
from web.gate import login_token
from web.operator_page import page

COOKIE = "operator_token"
FORMATS = {"csv": ("text/csv; charset=utf-8", as_csv), "json": ("application/json", as_json)}


def add_operator_page(build: Callable[[date, date], Report], token: str, logins: Logins | None,
                      keep_days: int) -> None:
    """`build(since, until)`: the report of a period (its end excluded)."""

    def refused(request: Request) -> Response | None:
        """None for an operator, else the answer that says why not."""
        given = [request.cookies.get(COOKIE, ""), request.query_params.get("token", "")]
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        given += [bearer.strip()] if scheme.lower() == "bearer" else []
        if token and any(secrets.compare_digest(value.encode(), token.encode()) for value in given if value.isascii()):
            return None
        if logins is not None and (name := logins.session_user(login_token(request.headers))):
            if logins.users.is_operator(name):
                return None
        if logins is None and not token:
            return JSONResponse({"detail": "The operator's page is off: set CHAT_OPERATOR_TOKEN, or turn logins on "
                                           "and add an operator (docs/operators.md)."}, status_code=404)
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
                                path="/operator")
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

    server.app.router.routes[0:0] = [Route("/operator", overview), Route("/operator/{name}", download)]
