"""What a visitor's socket may send: every Chainlit socket event checked before Chainlit's own handler sees it.

Chainlit 2.12 trusts its page: it takes any string as a new thread's id, stores a message with whatever
type and metadata the client gave it (a "user" message of type `assistant_message` would later be replayed
to the model, and exported, as the assistant's words), lets a visitor without a login open any thread by
id, queues every message a client sends however many, and lets a malformed event raise deep inside its
handlers. Here each event is checked first: a thread id must be a UUID (without logins, a stored one gives
a new chat instead), a message is rebuilt from its text and id alone as a `user_message` under an id the chat
has not used, only the visitor's own questions can be edited, one question at a time per chat, and anything
malformed is refused with one log line while every other chat goes on. Knows
nothing of the model.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from chainlit.chat_context import chat_context
from chainlit.context import init_ws_context
from chainlit.message import ErrorMessage, Message
from chainlit.session import WebsocketSession

from history.ids import is_uuid
from web.chainlit_patches import guard_socket_events

log = logging.getLogger(__name__)
CLIENT_TYPES = {"webapp", "copilot", "teams", "slack", "discord"}
OFF = ("audio_start", "audio_chunk", "audio_end", "message_favorite", "fetch_favorites")  # features turned off


class EventRefused(Exception):
    """A client event that is not what Chainlit's page sends; its message says why, for the log, and `tell`
    what the visitor sees, where an honest page could have sent it."""

    def __init__(self, reason: str, tell: str = "") -> None:
        super().__init__(reason)
        self.tell = tell


def guard_socket(max_message_chars: int, logins: bool, thread_exists: Callable[[str], Awaitable[bool]],
                 commands: frozenset[str] = frozenset()) -> None:
    """Put the checks in front of Chainlit's socket handlers. `max_message_chars`: the longest question taken
    (longer ones cannot fit the model's context anyway); `logins`: whether visitors log in; `thread_exists`:
    whether the database holds a thread of that id; `commands`: the ids of the composer's commands the app offers."""
    def guarded_connect(connect: Callable) -> Callable:
        async def checked_connect(sid: str, environ: dict, auth: Any = None) -> Any:
            try:
                thread_id = _check_auth(auth)
            except EventRefused as reason:
                log.warning("Refused a socket connection from %s: %s", _address(environ), reason)
                raise ConnectionRefusedError(str(reason)) from None
            if thread_id and not logins and await thread_exists(thread_id):
                # Nobody owns a thread without logins, so nobody may open one again: a reloaded page starts anew.
                log.warning("A socket from %s asked for stored thread %s without logins; it gets a new chat",
                            _address(environ), thread_id)
                auth = {**auth, "threadId": ""}
            return await connect(sid, environ, auth)

        return checked_connect

    checks = {"client_message": functools.partial(_new_question, max_message_chars, commands),
              "edit_message": functools.partial(_edited_question, max_message_chars, commands),
              **dict.fromkeys(OFF, _never), **dict.fromkeys(("chat_settings_change", "chat_settings_edit"), _settings),
              **dict.fromkeys(("connection_successful", "clear_session", "stop", "window_message"))}
    guard_socket_events({"connect": guarded_connect} | {
        event: functools.partial(_checked, event, check=check) for event, check in checks.items()})


def _checked(event: str, handler: Callable, check: Callable[[str, Any], Any] | None) -> Callable:
    """`handler` behind `check` (which returns the payload to hand on, or raises `EventRefused`); an event with no
    session, or whose handler trips over a malformed payload, is refused with one log line."""

    async def guarded(sid: str, *payload: Any) -> Any:
        try:
            if WebsocketSession.get(sid) is None:
                raise EventRefused("no session (connect first)")
            if check is not None:
                payload = (check(sid, payload[0] if payload else None),)
            return await handler(sid, *payload)
        except EventRefused as reason:
            log.warning("Refused a %r event from socket %s: %s", event, sid, reason)
            if reason.tell:
                init_ws_context(sid)
                await ErrorMessage(content=reason.tell).send()
        except (KeyError, TypeError, ValueError, AttributeError, AssertionError) as error:
            log.warning("Refused a malformed %r event from socket %s: %s: %s", event, sid, type(error).__name__,
                        str(error)[:200])
        return None

    return guarded


def _check_auth(auth: Any) -> str | None:
    """The thread id a connection asks for (None for a new chat), once its `auth` is what the page sends."""
    if not isinstance(auth, dict):
        raise EventRefused("no auth object")
    if not isinstance(auth.get("sessionId"), str) or not 0 < len(auth["sessionId"]) <= 100:
        raise EventRefused("no session id")
    if not isinstance(auth.get("clientType"), str) or auth["clientType"] not in CLIENT_TYPES:  # a list is unhashable
        raise EventRefused(f"unknown client type {str(auth.get('clientType'))[:40]!r}")
    for key in ("chatProfile", "userEnv"):
        if not isinstance(auth.get(key), (str, type(None))) or len(auth.get(key) or "") > 10_000:
            raise EventRefused(f"{key} is not a short text")
    thread_id = auth.get("threadId") or None  # the page sends "" for a new chat
    if thread_id is not None and not is_uuid(thread_id):
        raise EventRefused(f"thread id {str(thread_id)[:60]!r} is not a UUID")
    return thread_id


def _question(max_chars: int, commands: frozenset[str], sid: str, payload: Any) -> dict:
    """A question rebuilt from what the page sends (its id, text, time and the app's command it was sent with): always
    a `user_message`, without the client's type, metadata, parent or files; one at a time in each chat."""
    message = payload.get("message") if isinstance(payload, dict) else None
    if not isinstance(message, dict):
        raise EventRefused("no message")
    if not isinstance(message.get("id"), str) or not is_uuid(message["id"]) or uuid.UUID(message["id"]).version != 4:
        raise EventRefused("the message id is not a UUID 4")
    text = message.get("output")
    if not isinstance(text, str):
        raise EventRefused("the message has no text")
    if len(text) > max_chars:
        raise EventRefused(f"the message has {len(text)} characters, more than the {max_chars} taken",
                      f"这条消息太长（{len(text)} 字），最多 {max_chars} 字，请缩短或分成几条发送。 This message is too long "
                      f"({len(text)} characters; at most {max_chars} fit): please shorten it or split it into several.")
    command = message.get("command")
    if command is not None and (not isinstance(command, str) or command not in commands):
        raise EventRefused(f"no command {str(command)[:40]!r} is offered")
    if payload.get("fileReferences"):
        raise EventRefused("file uploads are off")
    task = WebsocketSession.get(sid).current_task
    if task is not None and not task.done():
        raise EventRefused("a reply is still running in this chat (one question at a time)")
    created = message.get("createdAt")
    name = message.get("name")
    return {"message": {"id": message["id"], "threadId": "", "type": "user_message", "output": text,
                        "name": name if isinstance(name, str) and len(name) <= 100 else "User",
                        "createdAt": created if isinstance(created, str) and len(created) <= 40 else "",
                        **({"command": command} if command else {})},
            "fileReferences": None}


def _new_question(max_chars: int, commands: frozenset[str], sid: str, payload: Any) -> dict:
    """A new question, under an id no message of this chat has: a reused id would overwrite that message's record."""
    question = _question(max_chars, commands, sid, payload)
    if _message_in_chat(sid, question["message"]["id"]) is not None:
        raise EventRefused("the message id is already used in this chat")
    return question


def _edited_question(max_chars: int, commands: frozenset[str], sid: str, payload: Any) -> dict:
    """An edit, only of a question this visitor asked in this chat: never of a reply, which would put words in the
    assistant's mouth (on resume, in exports, and in what the model reads as its own)."""
    question = _question(max_chars, commands, sid, payload)
    edited = _message_in_chat(sid, question["message"]["id"])
    if edited is None or edited.type != "user_message":
        raise EventRefused("an edit of a message that is not one of this chat's questions",
                      "只能修改您自己的问题。 Only your own questions can be edited.")
    return question


def _message_in_chat(sid: str, message_id: str) -> Message | None:
    init_ws_context(sid)
    return next((message for message in chat_context.get() if message.id == message_id), None)


def _settings(sid: str, payload: Any) -> dict:
    if not isinstance(payload, dict) or len(payload) > 50:
        raise EventRefused("settings are not a small object")
    return payload


def _never(sid: str, payload: Any) -> Any:
    raise EventRefused("this feature is off")


def _address(environ: dict) -> str:
    """The client's address: the proxy's word for it only where the proxy is trusted (`CHAT_TRUSTED_PROXIES`, which
    the web server applies before any of this runs), never a header anyone can send."""
    return environ.get("REMOTE_ADDR") or "an unknown address"
