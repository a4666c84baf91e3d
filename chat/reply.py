"""The reply to a question, in named steps over the chat's session: `admit` (the visitor's daily allowance, the engine
and the documents ready, the question into the conversation), `retrieve` (the passages, with the knowledge base on; a
question they do not answer is told so without the model), `render` (the prompt fitted to the context), the reply
streamed into a message (`chat.stream`, which Compare and branches use too), `check`ed against its sources and kept in
the conversation, and the visitor told if the store did not take it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing

import chainlit as cl

from chat import chat_options
from chat.admission import in_line, ready_engine
from chat.allowance import over_limit
from chat.aside import stream_aside
from chat.check import cite, shown
from chat.parts import ChatApp
from chat.script import in_script, in_their_script
from chat.session import ChatSession, current_session, refresh_stats_panel, remember_options
from chat.stream import stored_figures, stream_message
from chat.waiting import engine_with_notice, knowledge_with_notice, tell_if_unsaved
from config.cantonese import as_the_model_reads
from config.errors import ChatError, MemoryLowError
from config.message import Message
from engine.api import ChatEngine, Refused, RenderedPrompt, ReplyEvent, ReplyStats, Sampling
from history.conversation import APPENDED, BY_APP, FINISH, REPLY
from retrieval.grounding import RULES, asks, grounded, not_covered, unanswered
from retrieval.index import Found
from ui import tokenize_command
from ui.notices import send_error
from ui.read_aloud import speech
from ui.stats_panel import footer
from ui.teaching import show_prompt, show_unanswered

log = logging.getLogger("app")


async def answer(app: ChatApp, message: cl.Message) -> None:
    """A visitor's question (or an edited one): its reply streamed, or, with Compare on, two at once."""
    session = current_session()
    engine = await admit(app, session, message)
    if engine is None:
        return
    options, persona = session.options, app.persona(session.profile)
    sampling = chat_options.sampling(app.settings, options)
    system_prompt, found = persona.system_prompt, None  # None: no knowledge base for this reply
    if options.knowledge and app.knowledge.in_use(persona.name):
        system_prompt += RULES  # the same for every reply: the system prompt's prefix stays cached
        found = await retrieve(app, session, engine, message.content)
        if found is None:
            return  # told without the model
    history = as_the_model_reads(session.conversation.model_messages())
    events, prompt, found = await render(engine, system_prompt, history, sampling, found)
    thread = cl.context.session.thread_id
    async with aclosing(events):
        if isinstance(prompt, Refused):
            session.conversation.rewind(message.id)
            await app.store.forget_step(thread, message.id)
            await send_error(prompt.message)
            return
        if app.store.store_again(thread, message.id):  # refused before, and now edited to fit
            await message.update()
        if options.teaching:
            await show_prompt(prompt, sampling, None if found is None else shown(found), session.prompt_views,
                              app.engine_service.capabilities.token_view)
        async with in_line(app):  # with Compare on, both replies in one place in line
            if options.compare and app.engine_service.capabilities.compare:
                await compare_answers(app, session, engine, system_prompt, prompt, events, sampling, found)
            else:
                await stream_answer(app, session, engine, prompt, events, sampling, found)
    session.told_unsaved = await tell_if_unsaved(app.store, session.told_unsaved)


async def admit(app: ChatApp, session: ChatSession, message: cl.Message) -> ChatEngine | None:
    """The engine for this question, once the visitor's daily allowance, the engine and the documents allow it, with
    the question in the conversation (an edit drops what followed it, in the store too); None where the chat says
    why not."""
    user = cl.context.session.user
    if limited := await over_limit(app.settings.database, app.settings.daily_tokens_per_user,
                                   user.identifier if user else None):
        await app.store.forget_step(cl.context.session.thread_id, message.id)
        await send_error(limited)
        return None
    try:
        engine = await ready_engine(app)
    except MemoryLowError as error:
        await send_error(str(error))
        await refresh_stats_panel(session, await app.engine_service.wait())  # shows the low-memory warning
        return None
    except ChatError as error:
        await send_error(str(error))
        return None
    await knowledge_with_notice(app.knowledge)
    session.alternatives = {}
    if session.conversation.ask(message.id, message.content):
        await app.store.delete_steps_after(cl.context.session.thread_id, message.id)
    await remember_options(app, session)
    return engine


async def retrieve(app: ChatApp, session: ChatSession, engine: ChatEngine, question: str) -> list[Found] | None:
    """The passages for the conversation's latest question, a third of the context at most in the model's own tokens
    (where that does not fit, `render` falls back to fewer); None where they do not answer it and the chat said so.
    Searched for, and checked, in the words the model reads (`config.cantonese.in_mandarin`)."""
    history = as_the_model_reads(session.conversation.messages())
    found = await asyncio.to_thread(app.knowledge.search, app.persona(session.profile).name, history,
                                    app.settings.max_model_len // 3, lambda text: len(engine.tokens(text)))
    if found and asks(question) and await asyncio.to_thread(unanswered, found, history[-1]["content"]):
        await say_not_covered(session, engine, question, found)
        return None
    return found


async def say_not_covered(session: ChatSession, engine: ChatEngine, question: str, found: list[Found]) -> None:
    """A question the passages found do not answer (`grounding.unanswered`): the reply says so in words, in the
    visitor's language and script, without asking the model (measured on the knowledge benchmark's development half:
    given such passages, the demo models answered from what they say of something else). With the teaching view on,
    a step shows the passages and says why."""
    if session.options.teaching:
        await show_unanswered(shown(found))
    text = in_their_script(not_covered(question, found), question)
    # Stored as a reply checked against the knowledge base that drew on no source: the operator's page lists it.
    reply = cl.Message(content=text, metadata={REPLY: stored_figures(ReplyStats(prompt_tokens=0), engine.model_name)
                                                | {FINISH: BY_APP, APPENDED: 0}})
    figures = footer(ReplyStats(prompt_tokens=0), speech=await asyncio.to_thread(speech, text))
    figures.props["by_app"] = True  # the footer says the model was not asked
    reply.elements = [figures]
    await reply.send()
    session.conversation.answer(reply.id, text, by_app=True)
    log.info("Reply: the passages found do not answer the question; said so without the model")


async def render(engine: ChatEngine, system_prompt: str, history: list[Message], sampling: Sampling,
                      found: list[Found] | None) -> tuple[AsyncIterator[ReplyEvent], ReplyEvent, list[Found] | None]:
    """A reply's events, its first event (the prompt, or a refusal) and the passages in the prompt: all the passages
    `found`, else the best one, else none, whichever fits the context first (how many tokens a passage takes depends
    on the model's tokenizer). `found` is None with the knowledge base off."""
    for passages in [None] if found is None else [found, found[:1], None] if len(found) > 1 else [found, None]:
        events = engine.reply(system_prompt, history if passages is None else grounded(history, passages), sampling)
        first = await anext(events)
        if not isinstance(first, Refused) or passages is None:
            return events, first, passages
        await events.aclose()


async def stream_answer(app: ChatApp, session: ChatSession, engine: ChatEngine, prompt: RenderedPrompt,
                        events: AsyncIterator[ReplyEvent], sampling: Sampling, found: list[Found] | None,
                        label: str | None = None) -> None:
    """The reply the conversation holds, also when stopped (never its thinking), naming the passages it drew on and
    the figures they do not hold (`found`: None with the knowledge base off). `label`: its sampling, with Compare on."""

    async def check_and_hold(reply: cl.Message) -> None:
        session.conversation.answer(reply.id, reply.content)
        session.alternatives[reply.id] = (reply, reply.content)
        if found is not None:
            persona = app.persona(session.profile).name
            known = await asyncio.to_thread(app.knowledge.places, persona)  # read from the index once it changes
            await cite(reply, found, session.conversation.turns[-2].content, session.options.teaching, known)

    question = session.conversation.turns[-1].content
    try:
        await stream_message(app, session, engine, prompt, in_script(events, question), sampling, REPLY,
                             check_and_hold, label=label)
    finally:
        await refresh_stats_panel(session, engine)


async def compare_answers(app: ChatApp, session: ChatSession, engine: ChatEngine, system_prompt: str,
                          prompt: RenderedPrompt, events: AsyncIterator[ReplyEvent], sampling: Sampling,
                          found: list[Found] | None) -> None:
    """Compare on: the reply with the chat's sampling and one with the second sampling (`chat_options.compared`) to
    the same prompt, streamed at the same time (the engine batches them), each labelled with its sampling. The first
    enters the conversation; the second can be kept instead."""
    second = chat_options.compared(sampling, session.options)
    history = as_the_model_reads(session.conversation.model_messages())
    other = engine.reply(system_prompt, history if found is None else grounded(history, found), second)
    async with aclosing(other):
        await anext(other)  # the same prompt: the same messages, passages and budget
        await asyncio.gather(
            stream_answer(app, session, engine, prompt, events, sampling, found, chat_options.label(sampling)),
            stream_aside(app, engine, prompt, other, second, "Compared reply", keepable=True,
                         label=chat_options.label(second)))


async def split_into_tokens(app: ChatApp, message: cl.Message) -> None:
    """The Tokenize command: the text's tokens and counts, from the tokenizers alone. Neither the text nor the
    answer enters the conversation or the stored thread."""
    thread = cl.context.session.thread_id
    await app.store.forget_step(thread, message.id)
    try:
        engine = await engine_with_notice(app.engine_service)
    except ChatError:
        return  # the notice says why
    tokens = await asyncio.to_thread(engine.tokens, message.content)
    others = await asyncio.to_thread(app.demo_tokenizers.counts, message.content)
    reply = tokenize_command.report(message.content, tokens, engine.model_name, others)
    await reply.send()
    await app.store.forget_step(thread, reply.id)
