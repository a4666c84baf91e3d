"""Waiting, with a notice in the chat while it lasts: for the engine (loading at start, or again after a failure), for
the documents present at start to be indexed; and the visitor told, once, when the database did not take the chat.
"""

from __future__ import annotations

import asyncio

import chainlit as cl

from config.errors import ChatError
from engine.api import ChatEngine
from engine.service import EngineService
from history.store import ChatStore
from retrieval.knowledge_base import KnowledgeBase
from ui.notices import UNSAVED, send_error


async def engine_with_notice(service: EngineService) -> ChatEngine:
    """The engine; while it loads (at start, or again after a failure) a notice in the chat says so."""
    if service.is_ready():
        return await service.wait()
    notice = cl.Message(content="⏳ 模型加载中，请稍候…  The model is loading, one moment…")
    await notice.send()
    try:
        engine = await service.wait()
    except ChatError as error:
        notice.content = f"❌ {error}"
        await notice.update()
        raise
    notice.content = f"✅ 模型已就绪：{engine.model_name}  The model is ready."
    await notice.update()
    return engine


async def knowledge_with_notice(knowledge: KnowledgeBase) -> None:
    """While the documents present at start are indexed, a notice in the chat says how far it is."""
    if knowledge.ready.is_set():
        return

    def indexing() -> str:
        done, total = knowledge.progress.done, knowledge.progress.total
        return f"📚 正在为资料建立索引：{done}/{total} 个文件…  Indexing the documents: {done} of {total} files…"

    notice = cl.Message(content=indexing())
    await notice.send()
    while not knowledge.ready.is_set():
        await asyncio.sleep(1)
        notice.content = indexing()
        await notice.update()
    notice.content = "✅ 资料已就绪。 The documents are ready."
    await notice.update()


async def tell_if_unsaved(store: ChatStore, told: bool) -> bool:
    """Tell the visitor, once until it recovers (`told`: already told), when the database did not take this
    conversation; whether they have been told now."""
    await store.settled()
    if not store.pending():
        return False
    if not told:
        await send_error(UNSAVED)
    return True
