"""A closed chat leaves nothing behind in the web process.

Chainlit 2.12 keeps each chat's messages in `chainlit.chat_context.chat_contexts`, a dictionary by session id, and
never takes a session's entry out: when a session is deleted (its socket closed and `session_timeout` passed, or at
once after the page's "clear session"), its user session and its socket maps go, its messages stay, with every
element they carry (a reply's sources, its token view). At a scenic area that is tens of kilobytes per chat, all day.
`forget_closed_chats` makes the session's deletion take its messages too (`web.chainlit_patches.after_session_deleted`);
`tests/test_closed_chats.py` fails if an upgrade changes what it relies on. Knows nothing of the model.
"""

from __future__ import annotations

from chainlit.chat_context import chat_contexts

from web.chainlit_patches import after_session_deleted


def forget_closed_chats() -> None:
    after_session_deleted(lambda session_id: chat_contexts.pop(session_id, None))
