"""A chat's turn to generate: one generation per chat at a time (`claim_chat`), the engine ready and memory enough
(`ready_engine`), and a place in the line of replies (`in_line`). Every generation takes its turn so: a reply,
Compare, a branch, the prompt's probabilities.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import chainlit as cl

from chat.parts import ChatApp
from chat.waiting import engine_with_notice
from config.errors import ChatError
from engine.api import ChatEngine
from ui.notices import BUSY, NO_LONGER_AVAILABLE, QueueNotice, send_error


def claim_chat() -> bool:
    """Make the running handler this chat's one generation, which Stop and a closed tab cancel (Chainlit does this
    itself for a question); False while another one runs. Called before any await, so two presses cannot both pass."""
    session = cl.context.session
    running = session.current_task
    if running is not None and not running.done() and running is not asyncio.current_task():
        return False
    session.current_task = asyncio.current_task()
    return True


async def ready_engine(app: ChatApp) -> ChatEngine:
    """The engine, once loaded (a notice says so meanwhile), if the machine has the memory for a new generation;
    raises `ChatError` with the message to show otherwise."""
    engine = await engine_with_notice(app.engine_service)
    app.floor.check()
    return engine


async def admit_button(app: ChatApp, chosen: object) -> ChatEngine | None:
    """The engine for a button's generation, or None once the visitor is told why not: what the button chose
    (`chosen`) is no longer kept, another generation of this chat runs, or the engine or the memory is not there."""
    if chosen is None:
        await send_error(NO_LONGER_AVAILABLE)
        return None
    if not claim_chat():
        await send_error(BUSY)
        return None
    try:
        return await ready_engine(app)
    except ChatError as error:
        await send_error(str(error))
        return None


@asynccontextmanager
async def in_line(app: ChatApp) -> AsyncIterator[None]:
    """One place in the line of generations (`CHAT_MAX_CONCURRENT_REPLIES`), the visitor told their place meanwhile."""
    notice = QueueNotice()
    try:
        async with app.line.place(notice.show):
            await notice.remove()
            yield
    finally:
        await notice.remove()  # also when stopped, or the tab closed, while waiting
