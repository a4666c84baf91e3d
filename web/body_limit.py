"""A cap on every request body, enforced at the door as the bytes arrive.

Chainlit 2.12's `POST /project/file` reads the whole upload (FastAPI first spools the multipart body, with no
limit) before it checks that uploads are on at all; its other routes that take a body set no limit either. This
ASGI middleware, in front of every route (the socket's long-polling transport included), answers before any body
is read: 403 to an upload while uploads are off, 413 to a body whose declared length is over its cap (an operator's
documents, `/operator/documents`: `CHAT_MAX_UPLOAD_MB`; a visitor's upload: Chainlit's config; anything else: 4 MiB,
enough for a long question); a body that
does not declare its length is counted as it arrives, and once it passes the cap the app is told the client left and
the client gets 413 (whatever the app would have answered). Knows nothing of
the model.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from chainlit.config import config
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect

from web.chainlit_patches import add_middleware

log = logging.getLogger(__name__)
Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

UPLOAD_PATH = "/project/file"
DOCUMENTS_PATH = "/operator/documents"
MULTIPART_MARGIN = 64 * 1024  # a multipart body's part headers and boundaries, beside the files themselves
MAX_BODY_BYTES = 4 * 1024 * 1024  # any other body: settings, feedback, socket messages (a long question is ~1 MB)
UPLOADS_OFF = "文件上传已关闭。 File uploads are off on this server."


class BodyLimit:
    """ASGI middleware: each request's body within `limit_for(path)` bytes (0: no body taken at all)."""

    def __init__(self, app: Callable, uploads_max_bytes: int, documents_max_bytes: int) -> None:
        self.app = app
        self.uploads_max_bytes = uploads_max_bytes  # 0 while uploads are off
        self.documents_max_bytes = documents_max_bytes

    def limit_for(self, path: str) -> int:
        if path == DOCUMENTS_PATH:
            return self.documents_max_bytes + MULTIPART_MARGIN
        return self.uploads_max_bytes if path == UPLOAD_PATH else MAX_BODY_BYTES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, limit = scope["path"], self.limit_for(scope["path"])
        declared = Headers(scope=scope).get("content-length", "")
        if path == UPLOAD_PATH and not limit:
            return await _refuse(scope, send, 403, UPLOADS_OFF)
        if declared.isdigit() and int(declared) > limit:
            return await _refuse(scope, send, 413, _too_large(limit))
        received, over = 0, False

        async def counted() -> dict:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:  # the app is told the client left, and stops reading
                over = True
                return {"type": "http.disconnect"}
            return message

        async def unless_over(message: dict) -> None:
            if not over:  # whatever the app answers to a body cut short (FastAPI: 400), the client gets 413
                await send(message)

        try:
            await self.app(scope, counted, unless_over)
        except ClientDisconnect:  # a route that reads the body meets the end this middleware made
            if not over:
                raise
        if over:
            await _refuse(scope, send, 413, _too_large(limit))


def _too_large(limit: int) -> str:
    most = f"{limit // 2 ** 20} MB" if limit >= 2 ** 21 else f"{limit // 1024} KiB"
    return f"请求内容过大（最多 {most}）。 The request's body is too large: at most {most}."


async def _refuse(scope: Scope, send: Send, status: int, detail: str) -> None:
    client = scope.get("client") or ("an unknown address",)
    log.warning("Refused %s %s from %s with %d before reading its body", scope["method"], scope["path"][:100],
                client[0], status)
    body = json.dumps({"detail": detail}, ensure_ascii=False).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def limit_bodies(documents_max_mb: int) -> None:
    """Cap every request body of the app (uploads by the config's `spontaneous_file_upload`, the operator's documents
    by `documents_max_mb`)."""
    uploads = config.features.spontaneous_file_upload
    enabled = uploads is not None and uploads.enabled
    max_mb = (uploads.max_size_mb or 0) if enabled else 0
    add_middleware(BodyLimit, uploads_max_bytes=int(max_mb * 1024 * 1024),
                              documents_max_bytes=documents_max_mb * 1024 * 1024)
