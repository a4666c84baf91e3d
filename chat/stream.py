"""One reply streamed into a new message, for a question's reply and for the replies set aside (Compare's second,
a branch): its answer into the message, its thinking into a step above it, the sidebar following, and what the stream
gave kept as it comes, so that the handler that started it has it also when the reply is stopped or fails; at its end,
also when stopped, its footer, its token view and its figures, one log line and the reply's metrics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace

import chainlit as cl
from chainlit.utils import utc_now

from chat.parts import ChatApp
from chat.session import ChatSession, leave_closed
from config.errors import ChatError
from engine.api import (
    ChatEngine,
    Finished,
    RenderedPrompt,
    ReplyEvent,
    ReplyStats,
    Sampling,
    TextDelta,
    TokenProbability,
)
from history.conversation import FINISH, SET_ASIDE
from telemetry import prometheus
from ui.notices import NO_ANSWER, send_error
from ui.read_aloud import speech
from ui.stats_panel import StatsPanel, footer, footer_figures
from ui.teaching import reply_token_view
from ui.thought import Thought

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
                          session.stats_panel if sidebar else None)
    finally:
        log_reply(session, sampling, streamed, len(session.conversation.model_messages()) - prompt.dropped_messages, kind)
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
        elif streamed.finished and not streamed.failed:  # ended by the model before a word (`Sampling.stop`)
            await send_error(NO_ANSWER)


def stored_figures(stats: ReplyStats, model: str) -> dict:
    """The figures kept with a reply: its footer's, and what the operator's usage counts (`insights.usage`)."""
    return {**footer_figures(stats), "prompt_tokens": stats.prompt_tokens, FINISH: stats.finish_reason,
            "model": model, "reply_s": None if stats.reply_time is None else round(stats.reply_time, 2)}


def log_reply(session: ChatSession, sampling: Sampling, streamed: Streamed, messages: int, kind: str) -> None:
    stats = streamed.stats
    log.info("%s: temperature %g, top_p %g, max %d new tokens; prompt %d tokens in %d messages, %d generated, "
             "first token %s s, %s tokens/s, %s, sidebar %s", kind, sampling.temperature, sampling.top_p,
             sampling.max_new_tokens, stats.prompt_tokens, messages, stats.generated_tokens,
             _round(stats.time_to_first_token), _round(stats.decode_tokens_per_second), stats.finish_reason,
             "on" if session.stats_panel else "off")


def _round(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@dataclass
class Streamed:
    """What a reply's stream gave so far: its latest statistics, its tokens' probabilities (with the teaching view
    on), and whether it finished or failed."""

    stats: ReplyStats
    probabilities: list[TokenProbability] = field(default_factory=list)
    finished: bool = False
    failed: bool = False


async def stream_into(reply: cl.Message, engine: ChatEngine, events: AsyncIterator[ReplyEvent],
                      streamed: Streamed, update_seconds: float, stats_panel: StatsPanel | None) -> None:
    """Stream a reply's events into `reply`, its thinking (if the model thinks) into a step above it, and into
    `streamed` as they come (so also when stopped); an engine fault ends it with the fault's message. The sidebar
    (`stats_panel`, None where another reply streaming beside it has it) follows it. `update_seconds`: how long deltas
    gather before the page gets them as one update."""
    thought = Thought(parent_id=reply.parent_id)  # beside the reply, in the same run
    if stats_panel:
        stats_panel.last_reply = streamed.stats
    ticker = asyncio.create_task(stats_panel.follow(engine)) if stats_panel else None
    try:
        async for event in events:
            streamed.stats, streamed.finished = event.stats, isinstance(event, Finished)
            if stats_panel:
                stats_panel.last_reply = streamed.stats
            if isinstance(event, TextDelta):
                streamed.probabilities.extend(event.logprobs)
            if isinstance(event, TextDelta) and event.kind == "thinking":
                await thought.add(event.text)
            elif isinstance(event, TextDelta) and (text := event.text if reply.content else event.text.lstrip()):
                if not reply.content:
                    # Chainlit stamps a message when it is sent whole; a streamed one is stamped when its answer
                    # starts, so the page shows it after its thinking.
                    reply.created_at = utc_now()
                    await thought.end()  # collapsed when the answer starts
                await reply.stream_token(text)
            else:
                continue
            # Deltas that arrive meanwhile reach the page as one update: each update costs the page a re-render.
            await asyncio.sleep(update_seconds)
    except ChatError as error:
        streamed.failed = True
        await cl.ErrorMessage(content=str(error)).send()
    finally:
        await thought.end()  # what was thought stays in its step, also when stopped
        if not streamed.finished:
            streamed.stats = replace(streamed.stats, finish_reason="abort")  # stopped, or ended by a fault
        prometheus.record_reply(streamed.stats, streamed.failed)
        if ticker:
            ticker.cancel()
        if stats_panel:
            stats_panel.last_reply = streamed.stats
