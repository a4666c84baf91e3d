"""The thread endpoints that Chainlit 2.12 leaves without an owner check, answered here with one.

Chainlit's `PUT /feedback` upserts whatever feedback id, step and thread the client names, and its
`DELETE /feedback` deletes any feedback by id; `PUT /project/thread/share` ignores `allow_thread_sharing =
false`. These routes go in front of Chainlit's: feedback only on a step of a thread the caller owns (with
logins, the thread's user; without, the thread of the caller's own chat session), and sharing refused
while the config turns it off. Without logins, a rating is taken back only by the browser that gave it: Chainlit's
page sends no session with `DELETE /feedback`, so the answer to a rating sets a random key in a cookie (for
`/feedback` only) and the key is remembered with the rating, in memory (the latest `MAX_GIVERS`). Knows nothing of
the model.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict

from chainlit.config import config
from chainlit.session import WebsocketSession
from chainlit.types import DeleteFeedbackRequest, UpdateFeedbackRequest
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from history.store import ChatStore
from web.auth import Logins
from web.chainlit_patches import route_first
from web.gate import login_token

log = logging.getLogger(__name__)
NOT_YOURS = JSONResponse({"detail": "No such message in your conversations."}, status_code=404)
SHARING_OFF = JSONResponse({"detail": "Sharing conversations is off on this server."}, status_code=404)
GIVER_COOKIE = "feedback_giver"
MAX_GIVERS = 10_000  # ratings remembered with the browser that gave them, without logins


def add_owner_checks(store: ChatStore, logins: Logins | None) -> None:
    givers: OrderedDict[str, str] = OrderedDict()  # without logins: a rating's id and the key of its browser

    async def owner_of_step(step_id: str) -> tuple[str, str | None] | None:
        """The step's thread and that thread's user (None without logins), if the step exists."""
        rows = await store.execute_sql('SELECT s."threadId" AS thread, t."userIdentifier" AS owner FROM steps s '
                                       'JOIN threads t ON t."id" = s."threadId" WHERE s."id" = :step', {"step": step_id})
        return (rows[0]["thread"], rows[0]["owner"]) if rows else None

    async def feedback(request: Request) -> Response:
        user = logins.session_user(login_token(request.headers)) if logins else None
        try:
            body = await request.json()
            update = (UpdateFeedbackRequest if request.method == "PUT" else DeleteFeedbackRequest).model_validate(body)
        except (ValueError, ValidationError) as error:
            return JSONResponse({"detail": f"Not a feedback request: {str(error)[:200]}"}, status_code=422)
        if request.method == "DELETE":
            rows = await store.execute_sql('SELECT "forId" FROM feedbacks WHERE "id" = :id', {"id": update.feedbackId})
            found = await owner_of_step(rows[0]["forId"]) if rows else None
            giver = givers.get(update.feedbackId)
            given_here = logins is not None or (giver is not None and secrets.compare_digest(
                giver.encode(), request.cookies.get(GIVER_COOKIE, "").encode()))
            if found is None or found[1] != user or not given_here:
                return _refused(request, update.feedbackId)
            await store.delete_feedback(update.feedbackId)
            givers.pop(update.feedbackId, None)
            return JSONResponse({"success": True})
        given = update.feedback
        found = await owner_of_step(given.forId)
        session = WebsocketSession.get_by_id(update.sessionId)
        mine = found is not None and (found[1] == user if logins else session is not None and session.thread_id == found[0])
        if given.id:
            earlier = await store.execute_sql('SELECT "forId" FROM feedbacks WHERE "id" = :id', {"id": given.id})
            mine = mine and (not earlier or earlier[0]["forId"] == given.forId)
        if not mine:
            return _refused(request, given.forId)
        given.threadId = found[0]
        response = JSONResponse({"success": True, "feedbackId": (feedback_id := await store.upsert_feedback(given))})
        if logins is None:
            key = request.cookies.get(GIVER_COOKIE) or secrets.token_urlsafe(24)
            givers[feedback_id] = key
            givers.move_to_end(feedback_id)
            while len(givers) > MAX_GIVERS:
                givers.popitem(last=False)
            response.set_cookie(GIVER_COOKIE, key, path="/feedback", httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
        return response

    async def sharing_off(request: Request) -> Response:
        return SHARING_OFF

    routes = [Route("/feedback", feedback, methods=["PUT", "DELETE"])]
    if not config.features.allow_thread_sharing:
        routes += [Route("/project/thread/share", sharing_off, methods=["PUT"]),
                   Route("/project/share/{thread_id}", sharing_off, methods=["GET"])]
    route_first(*routes)


def _refused(request: Request, what: str) -> Response:
    log.warning("Refused %s /feedback for %.60r from %s: not the caller's conversation", request.method, what,
                request.client.host if request.client else "an unknown address")
    return NOT_YOURS
