"""One reply streamed into a new message, for a question's reply and for the replies set aside (Compare's second,
a branch): its footer, its token view and its figures added at its end, also when stopped, and one log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import chainlit as cl

from chat.parts import ChatApp
from chat.session import ChatSession, leave_closed
from engine.api import ChatEngine, RenderedPrompt, ReplyEvent, ReplyStats, Sampling, TokenProbability
from history.conversation import SET_ASIDE
from ui.dashboard import footer, footer_figures
from ui.read_aloud import speech
from ui.streaming import Streamed, stream_into
from ui.teaching import reply_token_view

log = logging.getLogger("app")


async def stream_message(app: ChatApp, session: ChatSession, engine: ChatEngine, prompt: RenderedPrompt,
                         events: AsyncIterator[ReplyEvent], sampling: Sampling, mark: str,
                         finish: Callable[[cl.Message], Awaitable[None]], label: str | None = None, kind: str = "Reply",
                         sidebar: bool = True, branch: tuple[int, list[TokenProbability]] | None = None) -> None:
    """Stream one reply into a new message marked `mark` in its metadata (`REPLY`, or `SET_ASIDE` for one the
    conversation does not hold), the sidebar following it where `sidebar`. At its end, also when stopped, a reply that
    said something gets its footer (with `label`, its sampling, where replies are compared), its token view (`branch`:
    the index of the token a branch starts from, and the tokens up to it) and its figures, then `finish(message)`
    adds what is its own, and the page gets it."""
    message = cl.Message(content="", metadata={mark: {}})
    streamed = Streamed(ReplyStats(prompt_tokens=len(prompt.token_ids)))
    figures = footer(streamed.stats, label)
    if label:  # sent before the reply streams, so the label shows which is which meanwhile
        await figures.send(for_id=message.id)
    try:
        await stream_into(message, engine, events, streamed, app.settings.stream_update_seconds,
                          session.dashboard if sidebar else None)
    finally:
        log_reply(session, sampling, streamed, len(session.conversation.turns) - prompt.dropped_messages, kind)
        if sidebar:
            session.last_reply = streamed.stats
        if message.content:
            branch_from, before = branch or (None, [])
            # Parsing the reply's Markdown takes time in proportion to it: not on the event loop, which every chat shares.
            figures.props = footer(streamed.stats, label, await asyncio.to_thread(speech, message.content)).props
            message.elements = [figures, *reply_token_view(session.branchable, message, prompt, sampling,
                                                           [*before, *streamed.probabilities], branch_from)]
            # Stored with it: elements are not.
            message.metadata[mark] = stored_figures(streamed.stats, engine.model_name)
            if mark == SET_ASIDE:
                message.metadata[mark]["branch_from"] = branch_from
            await finish(message)
            await message.update()
            await leave_closed(session)


def stored_figures(stats: ReplyStats, model: str) -> dict:
    """The figures kept with a reply: its footer's, and what the operator's usage counts (`insights.usage`)."""
    return {**footer_figures(stats), "prompt_tokens": stats.prompt_tokens, "finish": stats.finish_reason,
            "model": model, "reply_s": None if stats.reply_time is None else round(stats.reply_time, 2)}


def log_reply(session: ChatSession, sampling: Sampling, streamed: Streamed, messages: int, kind: str) -> None:
    stats = streamed.stats
    log.info("%s: temperature %g, top_p %g, max %d new tokens; prompt %d tokens in %d messages, %d generated, "
             "first token %s s, %s tokens/s, %s, sidebar %s", kind, sampling.temperature, sampling.top_p,
             sampling.max_new_tokens, stats.prompt_tokens, messages, stats.generated_tokens,
             _round(stats.time_to_first_token), _round(stats.decode_tokens_per_second), stats.finish_reason,
             "on" if session.dashboard else "off")


def _round(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
