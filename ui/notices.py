"""What the chat says about the app rather than the question: the model or the documents still loading, a place in
the line of replies, a conversation the database did not take, and the errors a visitor's own action meets.
"""

from __future__ import annotations

import asyncio

import chainlit as cl

from config.errors import ChatError
from engine.api import ChatEngine
from engine.service import EngineService
from history.store import ChatStore
from retrieval.knowledge_base import KnowledgeBase

BUSY = ("这个对话里还有一个回答在进行中：请等它结束，或按停止。 A reply is still being written in this chat: wait for it "
        "to finish, or press Stop.")
NO_LONGER_AVAILABLE = ("这个选择已不可用，请重新提问。 That choice is no longer available (the page is older than the "
                       "session): ask the question again.")
LOGIN_ENDED = ("您的登录已失效（用户已删除或密码已更改），请刷新页面重新登录。 Your login has ended (the user was removed or "
               "the password changed): reload the page and log in again.")
ONLY_LATEST = "只能保留最新问题的回答。 Only a reply to the latest question can be kept."
UNSAVED = ("⚠️ 对话暂时无法保存，服务器恢复后会自动补存；回答不受影响。 This conversation could not be saved just now (the "
           "server's log says why); it is saved as soon as the database takes writes again. Answers are not affected.")


async def send_error(text: str) -> None:
    await cl.ErrorMessage(content=text).send()


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


class QueueNotice:
    """The message a waiting visitor sees, with their place in the line, updated as it moves."""

    def __init__(self) -> None:
        self._message: cl.Message | None = None

    async def show(self, place: int) -> None:
        text = f"⏳ 排队中：您前面还有 {place - 1} 位。 Waiting: number {place} in line, your reply starts soon."
        if self._message is None:
            self._message = cl.Message(content=text)
            await self._message.send()
        else:
            self._message.content = text
            await self._message.update()

    async def remove(self) -> None:
        if self._message is not None:
            await self._message.remove()
            self._message = None


async def tell_if_unsaved(store: ChatStore, told: bool) -> bool:
    """Tell the visitor, once until it recovers (`told`: already told), when the database did not take this
    conversation; whether they have been told now."""
    await store.settled()
    if not store.pending():
        return False
    if not told:
        await send_error(UNSAVED)
    return True
