"""A closed chat leaves nothing behind: Chainlit's own session, with a message added through Chainlit's own chat
context, takes that message with it when it is deleted (`web.closed_chats`). Fails if a Chainlit upgrade keeps a
chat's messages somewhere else than where the app takes them from."""

from __future__ import annotations

import uuid

import pytest
from chainlit.chat_context import chat_context, chat_contexts
from chainlit.context import init_ws_context
from chainlit.message import Message
from chainlit.session import WebsocketSession

from web.closed_chats import forget_closed_chats

pytestmark = pytest.mark.fast


async def test_a_deleted_session_takes_its_messages_with_it():
    forget_closed_chats()
    session = WebsocketSession(id=str(uuid.uuid4()), socket_id=str(uuid.uuid4()), emit=lambda *_: None,
                               emit_call=lambda *_: None, user_env={}, client_type="webapp")
    init_ws_context(session)
    chat_context.add(Message(content="广州塔有多高？"))
    assert [message.content for message in chat_contexts[session.id]] == ["广州塔有多高？"]
    await session.delete()
    assert session.id not in chat_contexts and WebsocketSession.get_by_id(session.id) is None
