"""Chainlit's handlers, and nothing else: each hands over to the app's parts, built once per process from the settings
and the engine service and wired into the web server (`assembly`), and to the chat's pipeline in `chat/`.

The engine is loaded once per process when the app starts and shared by every session; this module never imports
vLLM, and reaches the engine only through those parts. `docs/architecture.md` follows a question through them.
"""

from __future__ import annotations

import asyncio

import chainlit as cl

from assembly import built_or_exit, serve
from chat import aside, reply, session
from history.store import ChatStore
from ui import stats_panel, tokenize_command
from ui.notices import LOGIN_ENDED, send_error
from ui.token_view import FORCE_TOKEN, WEIGH_PROMPT

APP, LOGINS = built_or_exit()
serve(APP, LOGINS)

if LOGINS:
    @cl.password_auth_callback
    async def log_in(name: str, password: str) -> cl.User | None:
        return cl.User(identifier=name) if await LOGINS.check_password(name, password) else None


@cl.data_layer
def conversations_store() -> ChatStore:
    return APP.store


@cl.on_app_startup
async def start_app() -> None:
    APP.start()


@cl.on_app_shutdown
async def stop_app() -> None:
    await APP.stop()


@cl.set_chat_profiles
async def chat_profiles(user: cl.User | None = None) -> list[cl.ChatProfile]:
    return APP.profiles()


@cl.on_chat_start
async def start_chat() -> None:
    await session.open_chat(APP)


@cl.on_chat_resume
async def resume_chat(thread: dict) -> None:
    await session.resume_chat(APP, thread)


@cl.on_chat_end
async def end_chat() -> None:
    """A closed tab or a lost socket: Chainlit keeps the session's task running, so cancel it here; leaving the
    stream aborts the engine request instead of generating for nobody."""
    task = cl.context.session.current_task
    if task and not task.done():
        task.cancel()


@cl.on_settings_update
async def change_options(proposed: dict) -> None:
    await session.change_options(APP, proposed)


@cl.on_message
async def answer(message: cl.Message) -> None:
    # Chainlit runs an edited question outside the session's task, where the stop button would not reach it.
    cl.context.session.current_task = asyncio.current_task()
    if LOGINS and not LOGINS.session_user(cl.context.session.token):
        await send_error(LOGIN_ENDED)
    elif message.command == tokenize_command.COMMAND["id"]:
        await reply.split_into_tokens(APP, message)
    else:
        await reply.answer(APP, message)


@cl.action_callback(WEIGH_PROMPT)
async def weigh_prompt(action: cl.Action) -> None:
    await aside.weigh_prompt(APP, action)


@cl.action_callback(FORCE_TOKEN)
async def force_token(action: cl.Action) -> None:
    await aside.branch_from_token(APP, action)


@cl.action_callback(stats_panel.SHOW)
async def show_stats(action: cl.Action) -> None:
    await session.open_stats_panel(APP)


@cl.action_callback(aside.KEEP_REPLY)
async def keep_reply(action: cl.Action) -> None:
    await aside.keep_reply(action)
