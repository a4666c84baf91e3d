"""One reply streamed into a Chainlit message: its answer into the message, its thinking into a step above it, the
sidebar following, and what the stream gave kept as it comes, so that the handler that started it (a question's
reply, a branch of the teaching view) has it also when the reply is stopped or fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace

import chainlit as cl
from chainlit.utils import utc_now

from config.errors import ChatError
from engine.api import ChatEngine, Finished, ReplyEvent, ReplyStats, TextDelta, TokenProbability
from telemetry import prometheus
from ui.dashboard import Dashboard
from ui.thought import Thought


@dataclass
class Streamed:
    """What a reply's stream gave so far: its latest statistics, its tokens' probabilities (with the teaching view
    on), and whether it finished or failed."""

    stats: ReplyStats
    probabilities: list[TokenProbability] = field(default_factory=list)
    finished: bool = False
    failed: bool = False


async def stream_into(reply: cl.Message, engine: ChatEngine, events: AsyncIterator[ReplyEvent],
                      streamed: Streamed, update_seconds: float, dashboard: Dashboard | None) -> None:
    """Stream a reply's events into `reply`, its thinking (if the model thinks) into a step above it, and into
    `streamed` as they come (so also when stopped); an engine fault ends it with the fault's message. The sidebar
    (`dashboard`, None where another reply streaming beside it has it) follows it. `update_seconds`: how long deltas
    gather before the page gets them as one update."""
    thought = Thought(parent_id=reply.parent_id)  # beside the reply, in the same run
    if dashboard:
        dashboard.last_reply = streamed.stats
    ticker = asyncio.create_task(dashboard.follow(engine)) if dashboard else None
    try:
        async for event in events:
            streamed.stats, streamed.finished = event.stats, isinstance(event, Finished)
            if dashboard:
                dashboard.last_reply = streamed.stats
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
        if dashboard:
            dashboard.last_reply = streamed.stats
