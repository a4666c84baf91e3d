"""What the chat says about the app rather than the question: a place in the line of replies, a conversation the
database did not take, and the errors a visitor's own action meets (the notices while the model or the documents load
are `chat.waiting`'s).
"""

from __future__ import annotations

import chainlit as cl

BUSY = ("这个对话里还有一个回答在进行中：请等它结束，或按停止。 A reply is still being written in this chat: wait for it "
        "to finish, or press Stop.")
NO_LONGER_AVAILABLE = ("这个选择已不可用，请重新提问。 That choice is no longer available (the page is older than the "
                       "session): ask the question again.")
LOGIN_ENDED = ("您的登录已失效（用户已删除或密码已更改），请刷新页面重新登录。 Your login has ended (the user was removed or "
               "the password changed): reload the page and log in again.")
NO_ANSWER = ("模型这次没有写出回答，请换个说法再问一次。 The model wrote no answer this time (it ended before its first word): "
             "ask again, in other words.")
ONLY_LATEST = "只能保留最新问题的回答。 Only a reply to the latest question can be kept."
UNSAVED = ("⚠️ 对话暂时无法保存，服务器恢复后会自动补存；回答不受影响。 This conversation could not be saved just now (the "
           "server's log says why); it is saved as soon as the database takes writes again. Answers are not affected.")


async def send_error(text: str) -> None:
    await cl.ErrorMessage(content=text).send()


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
