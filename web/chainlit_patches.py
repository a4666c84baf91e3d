"""Every change the app makes to Chainlit's own server, in one place, each with why. Written against the Chainlit
versions in `TESTED`: `require_tested_chainlit` stops the app at start on any other, and `tests/test_chainlit_patches.py`
fails where an upgrade would leave one of these changes without effect. The modules of `web/` say what they add; this
one says how it gets into Chainlit.

- `route_first`: Chainlit serves its page for any path (its last route, `/{full_path:path}`); a route added after it
  is never reached, so the app's routes (health, join, operator, owner checks, the widget's theme) go in front.
- `add_middleware`: on Chainlit's Starlette app, before its first request (Starlette builds the stack then).
- `guard_socket_events`: each socket event handler Chainlit registered, replaced by the same handler behind a check
  (python-socketio dispatches through its handler table).
- `accept_socket_from`: the socket's origin check, Chainlit's CORS middleware's origins, and engine.io's own copy of
  the CORS headers dropped (the middleware already sends them; two copies make the browser refuse both).
- `rewrite_page`: Chainlit's page template, as each request reads it, rewritten (served offline).
- `after_session_deleted`: Chainlit deletes a closed chat's session but keeps its messages; the app forgets them then.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version

import chainlit.server as server
from chainlit.session import WebsocketSession
from packaging.specifiers import SpecifierSet
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute

from config.errors import ChatError

TESTED = SpecifierSet("==2.12.*")  # the Chainlit versions these changes were written and tested against


def require_tested_chainlit(installed: str | None = None) -> None:
    """Raise `ChatError` where the installed Chainlit is not one these changes were tested against."""
    installed = installed or version("chainlit")
    if installed not in TESTED:
        raise ChatError(f"Chainlit {installed} is installed, but the app was tested with Chainlit {TESTED} only: "
                        f"install the pinned version (pip install -r requirements.txt), or update "
                        f"web/chainlit_patches.py and its tests for {installed}.")


def route_first(*routes: BaseRoute) -> None:
    server.app.router.routes[0:0] = routes


def add_middleware(middleware: type, **options: object) -> None:
    server.app.add_middleware(middleware, **options)


def guard_socket_events(guards: dict[str, Callable[[Callable], Callable]]) -> None:
    """Each event's handler replaced by `guards[event](handler)`; an event Chainlit no longer has raises KeyError."""
    handlers = server.sio.handlers["/"]
    for event, guard in guards.items():
        handlers[event] = guard(handlers[event])


def accept_socket_from(origin_allowed: Callable[[str | None, dict], bool], allowed: tuple[str, ...]) -> None:
    """The socket accepted from origins `origin_allowed` takes; HTTP requests from another site from `allowed` only."""
    server.sio.eio.cors_allowed_origins = origin_allowed
    server.sio.eio._cors_headers = lambda environ: []
    cors = [middleware for middleware in server.app.user_middleware if middleware.cls is CORSMiddleware]
    if not cors:
        raise RuntimeError("Chainlit no longer adds its CORS middleware: update web/chainlit_patches.py.")
    for middleware in cors:
        middleware.kwargs["allow_origins"] = list(allowed)


def chainlit_page(root_path: str = "") -> str:
    """Chainlit's page as it serves it (before any rewrite)."""
    return _CHAINLIT_TEMPLATE(root_path)


def rewrite_page(rewrite: Callable[[str, str], str]) -> None:
    """Chainlit's page served as `rewrite(page, root_path)` makes it."""
    server.get_html_template = lambda root_path: rewrite(_CHAINLIT_TEMPLATE(root_path), root_path)


def after_session_deleted(forget: Callable[[str], object]) -> None:
    """`forget(session id)` once Chainlit has deleted a chat's session (its socket closed and its timeout passed)."""
    delete = WebsocketSession.delete

    async def delete_and_forget(session: WebsocketSession) -> None:
        await delete(session)
        forget(session.id)

    WebsocketSession.delete = delete_and_forget


_CHAINLIT_TEMPLATE = server.get_html_template
