"""Chainlit handlers: chat profiles (personas), the chat history of a session, and streaming replies.

Everything about the model lives in `engine/`; this module speaks Chainlit and never imports vLLM.
The engine is loaded once per process when the app starts and shared by every session.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import chainlit as cl

from engine.chat_engine import ReplyStats, Sampling
from engine.config import load_settings
from engine.errors import ChatError, MessageTooLongError
from engine.model_source import resolve_model
from engine.personas import Persona, load_personas
from engine.preflight import check_model
from engine.prompt import Message
from engine.service import is_ready, shutdown_engine, start_engine, wait_for_engine

log = logging.getLogger("app")

try:
    SETTINGS = load_settings()
    MODEL = resolve_model(SETTINGS.model, SETTINGS.cache_dir, prepare=False)
    check_model(MODEL, SETTINGS)
    PERSONAS = {persona.name: persona for persona in load_personas(SETTINGS.prompts_dir, SETTINGS.persona)}
except ChatError as error:
    print(f"\nCannot start: {error}\n", file=sys.stderr)
    sys.exit(2)

# Deltas that arrive within this time are sent to the browser as one update: a fast engine then
# costs the page at most 10 re-renders a second, while a 10 tokens/s model still streams per token.
UI_UPDATE_INTERVAL = 0.1

DEFAULT_SAMPLING = Sampling(SETTINGS.temperature, SETTINGS.top_p, SETTINGS.max_new_tokens,
                            SETTINGS.top_k, SETTINGS.repetition_penalty)


@cl.on_app_startup
async def load_engine_in_background() -> None:
    start_engine(SETTINGS, MODEL)


@cl.on_app_shutdown
async def stop_engine() -> None:
    await asyncio.to_thread(shutdown_engine)


@cl.set_chat_profiles
async def chat_profiles(user: cl.User | None = None) -> list[cl.ChatProfile]:
    return [
        cl.ChatProfile(name=persona.name, display_name=persona.display_name,
                       markdown_description=persona.description, default=index == 0)
        for index, persona in enumerate(PERSONAS.values())
    ]


def current_persona() -> Persona:
    return PERSONAS.get(cl.user_session.get("chat_profile") or "", next(iter(PERSONAS.values())))


@cl.on_chat_start
async def start_chat() -> None:
    cl.user_session.set("history", [])
    if is_ready():
        return
    notice = cl.Message(content="⏳ 模型加载中，请稍候…  The model is loading, one moment…")
    await notice.send()
    try:
        engine = await wait_for_engine()
    except ChatError as error:
        notice.content = f"❌ {error}"
    else:
        notice.content = f"✅ 模型已就绪：{engine.model_name}  The model is ready."
    await notice.update()


@cl.on_message
async def answer(message: cl.Message) -> None:
    try:
        engine = await wait_for_engine()
    except ChatError as error:
        await cl.ErrorMessage(content=str(error)).send()
        return
    history: list[Message] = cl.user_session.get("history")
    history.append({"role": "user", "content": message.content})
    try:
        prompt = engine.render(current_persona().system_prompt, history, DEFAULT_SAMPLING.max_new_tokens)
    except MessageTooLongError as error:
        history.pop()
        await cl.ErrorMessage(content=str(error)).send()
        return

    prompt_messages = len(history) - prompt.dropped_messages
    reply = cl.Message(content="")
    stats = ReplyStats(prompt_tokens=len(prompt.token_ids))
    try:
        async for text in engine.stream_reply(prompt, DEFAULT_SAMPLING, stats):
            await reply.stream_token(text)
            await asyncio.sleep(UI_UPDATE_INTERVAL)
    except ChatError as error:
        await cl.ErrorMessage(content=str(error)).send()
    finally:
        log.info("Reply: prompt %d tokens in %d messages, %d generated, first token %s s, %s tokens/s, %s",
                 stats.prompt_tokens, prompt_messages, stats.generated_tokens, _round(stats.time_to_first_token),
                 _round(stats.decode_tokens_per_second), stats.finish_reason)
        # A stopped reply stays in the chat and in the history as what the assistant said.
        if reply.content:
            history.append({"role": "assistant", "content": reply.content})
            await reply.update()


def _round(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
