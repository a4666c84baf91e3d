"""Who may use the operator's routes, by what name their changes are recorded, and the page's anti-forgery token.

With logins, an operator is a user the users file marks so; without, the holder of `CHAT_OPERATOR_TOKEN` (a bearer
header, or the cookie `/operator?token=…` leaves). Wrong tokens are counted per address: after `MAX_WRONG_TOKENS`
within 15 minutes the address gets 429 until they age out.
"""

from __future__ import annotations

import hmac
import math
import secrets

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from web.auth import Logins, LoginThrottle, network_of
from web.gate import login_token

COOKIE = "operator_token"
TOKEN_HOLDER = "令牌 token"  # the name an operator without a login goes by in the activity list
MAX_WRONG_TOKENS = 5  # per address within the throttle's window (15 minutes)


class OperatorCheck:
    """Who may use the operator's routes (`refused`), by what name their changes are recorded (`name`), and the
    page's anti-forgery token (`form_token`): a change that a cookie authenticates must carry it, so that no other
    page (not even one the browser sends the cookie with) can make one; a bearer header needs none."""

    def __init__(self, token: str, logins: Logins | None) -> None:
        self.token, self.logins = token, logins
        self.wrong_tokens = LoginThrottle(MAX_WRONG_TOKENS, LoginThrottle.WINDOW)
        self._secret = secrets.token_bytes(32)  # a new one at each start: a page from before asks for a reload

    def refused(self, request: Request) -> Response | None:
        """None for an operator, else the answer that says why not."""
        if self._operator_login(request):  # logged in: the password was throttled at the login
            return None
        keys = [f"operator:{network_of(request.client.host if request.client else 'unknown')}"]
        if wait := self.wrong_tokens.locked_for(keys):
            return JSONResponse({"detail": "Too many wrong operator tokens from this address: try again later."},
                                status_code=429, headers={"retry-after": str(math.ceil(wait))})
        given = [request.cookies.get(COOKIE, "")]
        given += [request.query_params.get("token", "")] if request.url.path == "/operator" else []
        given += [self._bearer(request)]
        given = [value for value in given if value]
        if any(self._is_token(value) for value in given):
            return None
        if self.logins is None and not self.token:
            return JSONResponse({"detail": "The operator's page is off: set CHAT_OPERATOR_TOKEN, or turn logins on "
                                           "and add an operator (docs/operators.md)."}, status_code=404)
        if self.token and given:  # a wrong operator token
            self.wrong_tokens.failed(keys)
        return JSONResponse({"detail": "只对运营者开放。Only for operators: log in as one (python -m web.accounts add "
                                       "NAME --operator), or send the CHAT_OPERATOR_TOKEN bearer token."},
                            status_code=403)

    def name(self, request: Request) -> str:
        """An operator's name for the activity list: their login, else the token's holder."""
        return self._operator_login(request) or TOKEN_HOLDER

    def form_token(self, request: Request) -> str:
        """The anti-forgery token of the credential in the request's cookies ("" when a bearer header is the
        credential: no other site can send one)."""
        if self._is_token(self._bearer(request)):
            return ""
        credential = request.cookies.get(COOKIE, "") or login_token(request.headers) or ""
        return hmac.new(self._secret, credential.encode(), "sha256").hexdigest()

    def forged(self, request: Request, given: str) -> bool:
        """Whether a change lacks the page's anti-forgery token where a cookie is what authenticates it."""
        expected = self.form_token(request)
        return bool(expected) and not secrets.compare_digest(given.encode(), expected.encode())

    def _operator_login(self, request: Request) -> str | None:
        if self.logins is not None and (name := self.logins.session_user(login_token(request.headers))):
            return name if self.logins.users.is_operator(name) else None
        return None

    def _is_token(self, value: str) -> bool:
        return bool(self.token and value and value.isascii()
                    and secrets.compare_digest(value.encode(), self.token.encode()))

    @staticmethod
    def _bearer(request: Request) -> str:
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        return bearer.strip() if scheme.lower() == "bearer" else ""
