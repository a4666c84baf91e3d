"""Who may reach what: origins for the socket and for HTTP, and, with logins on, the gate in front of every
request and socket of the app.

Origins: Chainlit 2.12 creates its Socket.IO server with `cors_allowed_origins=[]`, which turns the
Origin check off, so any web page a visitor opens could talk to the chat over their connection.
`restrict_origins` makes the socket accept only pages served under one of the app's own names (`web.hosts`, at the
address the socket itself was opened at) and of the sites `CHAT_ALLOWED_ORIGINS` names (a proxy's address, host sites
of the widget), which are also the HTTP CORS origins (the widget calls the app's API from the host site's page).

Logins (`AccessGate`): only what the login page itself needs is open (`OPEN_PATHS`, `OPEN_PREFIXES`);
Chainlit's `/project/*` API, `/user`, the thread endpoints and the socket need a login that still counts
(`web.auth.Logins.session_user`); a token that no longer counts is refused and its cookie cleared, so
the page shows the login form again. `POST /login` is throttled (`web.auth.LoginThrottle`). Health and
metrics (`web.health`) and the operator's page (`web.operator`) check their own access.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from chainlit.auth.cookie import get_token_from_cookies
from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser

from telemetry import prometheus
from web.auth import LOCKED_OUT, LOGIN_ADDRESS, Logins, login_keys
from web.chainlit_patches import accept_socket_from, add_middleware
from web.hosts import AppNames

log = logging.getLogger(__name__)

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

OPEN_PATHS = frozenset({"/", "/login", "/logout", "/auth/config", "/project/translations", "/logo", "/favicon",
                        "/health", "/healthz", "/metrics", "/operator"})
# Static files, and the page shell of a thread's address (the page itself then asks for the login).
OPEN_PREFIXES = ("/public/", "/assets/", "/avatars/", "/thread/", "/copilot/",  # /copilot/: the widget's script
                 "/operator/")
AUTH_COOKIE = "access_token"
MAX_LOGIN_BYTES = 4096  # a login form is a name and a password; anything larger is refused unread


def restrict_origins(allowed: tuple[str, ...], names: AppNames) -> None:
    """Accept the socket only from the app's own pages and from `allowed` (`CHAT_ALLOWED_ORIGINS`)."""
    def origin_allowed(origin: str | None, environ: dict) -> bool:
        if origin in allowed:
            return True
        netloc = urlsplit(origin or "").netloc
        return names.knows(netloc) and netloc == environ.get("HTTP_HOST")

    accept_socket_from(origin_allowed, allowed)


def login_token(headers: Headers) -> str | None:
    """Chainlit's login token: its cookie (possibly in chunks), else an `Authorization: Bearer` header."""
    if token := get_token_from_cookies(cookie_parser(headers.get("cookie", ""))):
        return token
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class AccessGate:
    """ASGI middleware: refuse what needs a login to anyone without one that still counts; throttle logins."""

    def __init__(self, app: Callable, logins: Logins) -> None:
        self.app = app
        self.logins = logins
        self.told_shared_address = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        path = scope["path"]
        if scope["type"] == "http" and scope["method"] == "POST" and path == "/login":
            return await self._login(scope, receive, send)
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return await self.app(scope, receive, send)
        token = login_token(Headers(scope=scope))
        if self.logins.session_user(token):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await receive()  # the connect message; closing before accepting answers the handshake with 403
            return await send({"type": "websocket.close", "code": 1008})
        # A token that no longer counts (user removed, password changed): clear it, so the page asks again.
        clear = [(b"set-cookie", f"{AUTH_COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=lax".encode())] if token else []
        await _json(send, 401, {"detail": "Unauthorized"}, clear)

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive, Headers(scope=scope).get("content-length", ""))
        if body is None:
            prometheus.LOGINS_REFUSED.labels("too_large").inc()
            return await _json(send, 413, {"detail": f"A login form is at most {MAX_LOGIN_BYTES} bytes."}, [])
        form = await Request(scope, _replay(body, receive)).form()
        address = (scope.get("client") or ("unknown",))[0]
        name = str(form.get("username", ""))[:200]
        self._note_shared_address(scope, address)
        self.logins.apply_unlock(name)
        keys = login_keys(name, address)
        throttle = self.logins.throttle
        locked = throttle.locked_for(keys)
        if locked or not throttle.begin(keys):
            prometheus.LOGINS_REFUSED.labels("locked_out").inc()
            retry = str(math.ceil(locked or throttle.MAX_DELAY)).encode()
            return await _json(send, 429, {"detail": LOCKED_OUT}, [(b"retry-after", retry)])
        status = 0

        async def note_status(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await asyncio.sleep(throttle.delay(keys))
            LOGIN_ADDRESS.set(address)  # for the password check's turn (`web.auth.FairChecks`)
            await self.app(scope, _replay(body, receive), note_status)
        finally:
            throttle.end(keys, True if 0 < status < 400 else False if status == 401 else None)
        if status == 401:
            prometheus.LOGINS_REFUSED.labels("wrong_password").inc()


    def _note_shared_address(self, scope: Scope, address: str) -> None:
        """Say once, in the log, when logins come from this machine without `X-Forwarded-For`: behind a proxy that
        sets none, every visitor has the proxy's address, and one visitor's wrong passwords slow down everyone's."""
        if self.told_shared_address or not address.startswith(("127.", "::1")):
            return
        if not Headers(scope=scope).get("x-forwarded-for"):
            self.told_shared_address = True
            log.warning("Logins: a login came from this machine (%s) without X-Forwarded-For. If a reverse proxy "
                        "stands in front of the app, make it set X-Forwarded-For: until then every visitor shares "
                        "its address, and wrong passwords from one slow down the logins of all", address)


async def _read_body(receive: Receive, declared_length: str) -> bytes | None:
    """The request's body, or None as soon as it is known to exceed `MAX_LOGIN_BYTES` (nothing more is read)."""
    if declared_length.isdigit() and int(declared_length) > MAX_LOGIN_BYTES:
        return None
    body = bytearray()
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_LOGIN_BYTES:
            return None
        if not message.get("more_body"):
            return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` as it was before the body was read: the body once, then whatever comes next (a disconnect)."""
    replayed = False

    async def replay() -> dict:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _json(send: Send, status: int, content: dict, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps(content).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def gate_logins(logins: Logins) -> None:
    add_middleware(AccessGate, logins=logins)
