"""The live statistics of a chat: the sidebar (`public/elements/StatsPanel.jsx`) and the footer under
each reply (`public/elements/ReplyFooter.jsx`).

`panel_props` turns measured figures into the sidebar's props (rounding only); `StatsPanel` owns one
session's sidebar element and refreshes it. Measuring is not its job: memory comes in MiB from the chat
(`telemetry.memory.memory_figures`), the model and its scheduler from the engine's `EngineState`, reply timing from
the `ReplyStats` of the reply's events.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import chainlit as cl

from engine.api import ChatEngine, EngineState, ReplyStats


def panel_props(engine: EngineState, memory: dict, reply: ReplyStats | None, streaming: bool) -> dict:
    return {
        "memory": memory,
        "reply": {} if reply is None else {
            "streaming": streaming,
            "ttft_s": _round(reply.time_to_first_token, 2),
            "tokens_per_s": _round(reply.decode_tokens_per_second, 1),
            "prompt_tokens": reply.prompt_tokens,
            "generated_tokens": reply.generated_tokens,
        },
        "engine": {
            "running": engine.running,
            "waiting": engine.waiting,
            "kv_cache_percent": _round(100 * engine.kv_cache_usage, 1),
            # Tokens the model kept of those speculation proposed (`engine.speculation`); none before any was.
            "speculation_accepted_percent": _round(100 * engine.accepted / engine.proposed, 1) if engine.proposed else None,
            "model": engine.model,
            "weights": engine.weights,
            "dtype": engine.dtype,
            "threads": engine.threads,
            "context": engine.context,
        },
        "updated": time.strftime("%H:%M:%S"),
    }


def footer_figures(reply: ReplyStats) -> dict:
    return {"generated_tokens": reply.generated_tokens, "tokens_per_s": _round(reply.decode_tokens_per_second, 1),
            "ttft_s": _round(reply.time_to_first_token, 2)}


def footer(reply: ReplyStats, label: str | None = None, speech: dict | None = None) -> cl.CustomElement:
    """The line under a reply, with its buttons: the live statistics (`SHOW`), and Read aloud where `speech` (the
    text and its language, `ui.read_aloud`) is given; `label`: the sampling it was drawn with, where replies are
    compared."""
    return cl.CustomElement(name="ReplyFooter", display="inline",
                            props={**footer_figures(reply), "label": label, "speech": speech, "show": SHOW})


TITLE = "运行状态 Live stats"
SHOW = "show_stats"  # the footer's button that opens the sidebar (an action callback)


class StatsPanel:
    """One session's sidebar. `refresh` re-measures and re-sends it; `follow` does so while a reply streams,
    showing `last_reply`, which the reply's handler sets from each event (both on Chainlit's loop)."""

    def __init__(self, read_memory: Callable[[], dict], interval: float) -> None:
        self._read_memory = read_memory  # the memory figures, read off the event loop
        self._interval = interval  # seconds between refreshes while a reply streams
        self._element: cl.CustomElement | None = None
        self.last_reply: ReplyStats | None = None

    async def refresh(self, engine: ChatEngine, streaming: bool = False) -> None:
        memory = await asyncio.to_thread(self._read_memory)
        props = panel_props(engine.state(), memory, self.last_reply, streaming)
        if self._element is None:
            self._element = cl.CustomElement(name="StatsPanel", props=props, display="side")
            await cl.ElementSidebar.set_elements([self._element])
        else:
            self._element.props = props
            # Not `update()`: Chainlit's element update also writes the element to a new file in the
            # session's folder every time (20 files a second with 8 chats streaming); the page needs only this.
            await cl.context.emitter.send_element(self._element.to_dict())
        # Chainlit's sidebar falls back to the element's name as its title after an element update.
        await cl.ElementSidebar.set_title(TITLE)

    async def follow(self, engine: ChatEngine) -> None:
        """Refresh every `interval` seconds until cancelled (when the reply ends)."""
        while True:
            await self.refresh(engine, streaming=True)
            await asyncio.sleep(self._interval)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
