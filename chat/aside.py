"""Replies the conversation does not hold, and the teaching view's buttons: a branch from a token of a reply
(`force_token`), Compare's second reply (streamed beside the first by `chat.reply`), the keep button that swaps one
of them in (`keep_reply`), and the prompt's probabilities (`weigh_prompt`). Each generation takes the chat's turn
(`chat.admission`) as a question's reply does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import chainlit as cl

from chat.admission import admit_button, in_line
from chat.parts import ChatApp
from chat.session import ChatSession, current_session, refresh_stats_panel
from chat.stream import stream_message
from config.errors import ChatError
from engine.api import ChatEngine, RenderedPrompt, ReplyEvent, Sampling, TokenProbability
from history.conversation import SET_ASIDE
from ui.notices import ONLY_LATEST, send_error
from ui.token_view import Branchable, forced, weighed_prompt

KEEP_REPLY = "keep_reply"  # the button under a reply to the latest question that the conversation does not hold


async def stream_aside(app: ChatApp, engine: ChatEngine, prompt: RenderedPrompt, events: AsyncIterator[ReplyEvent],
                       sampling: Sampling, kind: str, keepable: bool, label: str | None = None,
                       branch: tuple[int, list[TokenProbability]] | None = None) -> None:
    """A reply set aside, streamed into a new message: a branch (`branch`), or Compare's second reply (`label`: its
    sampling), which leaves the sidebar to the first. One to the latest question (`keepable`) gets a keep button."""
    session = current_session()

    async def offer(aside: cl.Message) -> None:
        if keepable:
            session.alternatives[aside.id] = (aside, aside.content)
            aside.actions = [keep_button(aside)]

    await stream_message(app, session, engine, prompt, events, sampling, SET_ASIDE, offer, label=label, kind=kind,
                         sidebar=branch is not None, branch=branch)


def keep_button(reply: cl.Message) -> cl.Action:
    return cl.Action(name=KEEP_REPLY, payload={"reply": reply.id}, label="保留这个回答 Keep this reply",
                     tooltip="对话从这个回答继续 The conversation goes on from this reply")


async def keep_reply(action: cl.Action) -> None:
    """A reply's keep button: it takes the place of the reply the conversation holds for the latest question, there
    and in the stored thread; that one gets the button."""
    swapped = session.hold(action.payload.get("reply")) if (session := current_session()) else None
    if swapped is None:
        await send_error(ONLY_LATEST)
        return
    reply, previous = swapped
    if reply is previous:
        return
    await reply.remove_actions()
    reply.actions, previous.actions = [], [keep_button(previous)]
    await reply.update()
    await previous.update()


async def branch_from_token(app: ChatApp, action: cl.Action) -> None:
    """An alternative's button in a reply's token view: the same reply up to that token, the alternative in its place,
    and the model's continuation, as a branch below. The conversation keeps the reply it holds; a branch of a reply to
    the latest question can take its place (`keep_reply`)."""
    session = current_session()
    origin = session.branchable.get(action.payload.get("element")) if session else None
    chosen = forced(origin.tokens, action.payload) if origin else None
    if (engine := await admit_button(app, chosen)) is None:
        return
    # The page shows the stop button and holds questions back meanwhile, as while a reply to a question streams.
    await cl.context.emitter.task_start()
    try:
        async with in_line(app):
            await stream_branch(app, session, engine, origin, *chosen)
    finally:
        await cl.context.emitter.task_end()


async def stream_branch(app: ChatApp, session: ChatSession, engine: ChatEngine, origin: Branchable, index: int,
                        token: TokenProbability) -> None:
    start = [*(kept.token_id for kept in origin.tokens[:index]), token.token_id]
    async with aclosing(engine.continue_reply(origin.prompt, start, origin.sampling)) as events:
        await stream_aside(app, engine, origin.prompt, events, origin.sampling, f"Branch from token {index}",
                           keepable=origin.reply_id in session.alternatives,
                           branch=(index, [*origin.tokens[:index], token]))
    await refresh_stats_panel(session, engine)


async def weigh_prompt(app: ChatApp, action: cl.Action) -> None:
    """The teaching view's button: the prompt's probabilities, one prefill, shown in its token view. A generation like
    any other: the chat's one at a time, a place in the line, the memory check."""
    session = current_session()
    view, prompt = (session.prompt_views.get(action.payload.get("element")) if session else None) or (None, None)
    if (engine := await admit_button(app, view)) is None:
        return
    try:
        async with in_line(app):
            logprobs = await engine.prompt_logprobs(prompt)
    except ChatError as error:
        await send_error(str(error))
        return
    weighed_prompt(view, logprobs)
    await view.update()
