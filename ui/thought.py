"""A thinking model's thinking on the page: a step above the answer, streamed live and collapsed once it ends."""

from __future__ import annotations

import chainlit as cl
from chainlit.utils import utc_now


class Thought:
    """One reply's thinking step, made when its first thinking arrives; `parent_id`: the reply's, so the page
    keeps the two together, in order."""

    def __init__(self, parent_id: str | None) -> None:
        self._parent_id = parent_id
        self._step: cl.Step | None = None

    async def add(self, text: str) -> None:
        if self._step is None:
            self._step = cl.Step(name="思考过程 Thinking", type="llm", parent_id=self._parent_id, show_input=False,
                                 default_open=True, auto_collapse=True)
            await self._step.send()
        await self._step.stream_token(text)

    async def end(self) -> None:
        if self._step is not None and self._step.end is None:
            self._step.end = utc_now()
            await self._step.update()
