"""Chainlit handlers: chat profiles (personas), each session's conversation (stored, resumed, rewound on edits), streaming replies.

Everything about the model lives in `engine/`; this module speaks Chainlit and reaches the engine through
`engine.api` (what a reply is) and `engine.service` (the one engine of this process), never vLLM.
The engine is loaded once per process when the app starts and shared by every session.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from collections.abc import AsyncIterator

import chainlit as cl

from web.admission import ReplyGate
from engine.api import ChatEngine, Refused, RenderedPrompt, ReplyEvent, ReplyStats, Sampling, TokenProbability
from config.settings import load_settings
from config.errors import ChatError, MemoryLowError, cannot
from web.memory import GIB, MemoryGuard, MemoryMonitor
from config.personas import Persona, load_personas
from engine.service import (check_personas_fit, current_engine, is_ready, prepare, restarts, shutdown_engine,
                            start_engine, wait_for_engine)
from engine.thinking import has_switch as has_thinking_switch
from engine.service import state as engine_state
from history.conversation import REPLY, SET_ASIDE, SOURCES, Conversation
from history.records import forget_idle
from history.schema import open_database
from history.store import ChatStore
from ui import chat_options, tokenizer_bench
from ui.dashboard import Dashboard, footer, footer_figures
from ui.streaming import Streamed, stream_into
from ui.token_view import FORCE_TOKEN, WEIGH_PROMPT, Branchable, forced, prompt_view, token_view, weighed_prompt
from ui.language import chinese_first
from ui import sources
from retrieval.grounding import RULES, drawn_on, grounded
from retrieval.index import Found
from retrieval.knowledge import KnowledgeBase
from ui.offline import serve_page_offline
from web import telemetry
from web.auth import Logins
from web.body_limit import limit_bodies
from web.gate import guard_logins, restrict_origins
from web.health import add_health_routes
from web.ownership import add_owner_checks
from web.private_files import make_private
from web.socket_guard import guard_socket

log = logging.getLogger("app")

try:
    SETTINGS = load_settings()
    MODEL = prepare(SETTINGS)
    THINKING_SWITCH = has_thinking_switch(MODEL)
    PERSONAS = {persona.name: persona for persona in load_personas(SETTINGS.prompts_dir, SETTINGS.persona)}
    # Any persona may answer from the operators' documents, with the rules that go with them.
    check_personas_fit(SETTINGS, MODEL, {name: persona.system_prompt + RULES for name, persona in PERSONAS.items()})
    LOGINS = Logins(SETTINGS.users_file, SETTINGS.state_dir, SETTINGS.login_max_failures,
                    SETTINGS.login_lockout_seconds) if SETTINGS.users_file else None
    open_database(SETTINGS.database)
    KNOWLEDGE = KnowledgeBase(SETTINGS.knowledge_index, SETTINGS.knowledge_folder,
                              {name: persona.knowledge for name, persona in PERSONAS.items()})
    OTHER_DEMOS = tokenizer_bench.other_demos(SETTINGS.cache_dir, MODEL)  # the Tokenize command compares with them
except ChatError as error:
    sys.exit(cannot("start", error))
make_private(SETTINGS.state_dir, [path for path in (SETTINGS.users_file, SETTINGS.database, Path(".env")) if path])
serve_page_offline()
chinese_first()
restrict_origins(SETTINGS.allowed_origins)
limit_bodies()
add_health_routes(MODEL.name, SETTINGS.metrics_token, LOGINS)

STORE = ChatStore(SETTINGS.database)
add_owner_checks(STORE, LOGINS)
# The longest question taken: text people write packs fewer than 8 characters into a token, so a longer one
# could not fit the model's context anyway.
guard_socket(max_message_chars=8 * SETTINGS.max_model_len, logins=LOGINS is not None,
             thread_exists=STORE.thread_exists, commands=frozenset({tokenizer_bench.COMMAND["id"]}))
GATE = ReplyGate(SETTINGS.max_concurrent_replies)
GUARD = MemoryGuard(int(SETTINGS.min_available_gib * GIB))
MEMORY = MemoryMonitor()
telemetry.watch(telemetry.LiveReadings(
    running=lambda: GATE.running, waiting=lambda: GATE.waiting,
    kv_cache_usage=lambda: engine.state().kv_cache_usage if (engine := current_engine()) else 0.0,
    app_pss=lambda: MEMORY.read().app_pss, engine_ready=lambda: engine_state() == "ready", restarts=restarts,
    servers=lambda: engine.state().servers if (engine := current_engine()) else ()))

if LOGINS:
    os.environ["CHAINLIT_AUTH_SECRET"] = LOGINS.secret  # Chainlit signs its login tokens with it
    guard_logins(LOGINS)

    @cl.password_auth_callback
    async def log_in(name: str, password: str) -> cl.User | None:
        return cl.User(identifier=name) if await LOGINS.check_password(name, password) else None


@cl.data_layer
def conversations_store() -> ChatStore:
    return STORE


@cl.on_app_startup
async def load_engine_in_background() -> None:
    start_engine(SETTINGS, MODEL)
    KNOWLEDGE.start()
    if SETTINGS.history_days:
        asyncio.create_task(forget_idle_conversations())


async def forget_idle_conversations() -> None:
    """Retention (CHAT_HISTORY_DAYS): at start, then once a day."""
    while True:
        forgotten = await asyncio.to_thread(forget_idle, SETTINGS.database, SETTINGS.history_days)
        log.info("Retention: deleted %d conversations idle for more than %d days", forgotten, SETTINGS.history_days)
        await asyncio.sleep(24 * 3600)


@cl.on_app_shutdown
async def stop_engine() -> None:
    await asyncio.to_thread(shutdown_engine)


@cl.set_chat_profiles
async def chat_profiles(user: cl.User | None = None) -> list[cl.ChatProfile]:
    return [
        cl.ChatProfile(name=persona.name, display_name=persona.display_name, markdown_description=persona.description,
                       icon=f"/public/avatars/{persona.name}.svg", default=index == 0,
                       starters=[cl.Starter(label=starter.label, message=starter.message) for starter in persona.starters])
        for index, persona in enumerate(PERSONAS.values())
    ]


def current_persona() -> Persona:
    return PERSONAS.get(cl.user_session.get("chat_profile") or "", next(iter(PERSONAS.values())))


@cl.on_chat_start
async def start_chat() -> None:
    await open_conversation(Conversation(), chat_options.initial_options(SETTINGS))


@cl.on_chat_resume
async def resume_chat(thread: dict) -> None:
    """A stored conversation opened again: the model's context is its stored questions and replies, with the
    persona (Chainlit restores the chat profile) and chat settings it had."""
    stored = (thread.get("metadata") or {}).get("options") or {}
    options, _ = chat_options.checked(SETTINGS, chat_options.initial_options(SETTINGS), stored)
    # Chainlit sends the stored thread to the page after this handler, and the page then starts afresh:
    # the sidebar follows in a task of its own, after that.
    await open_conversation(Conversation.from_steps(thread["steps"]), options, sidebar_later=True)
    asyncio.create_task(sources.show_again(thread["steps"]))


async def open_conversation(conversation: Conversation, options: dict, sidebar_later: bool = False) -> None:
    cl.user_session.set("conversation", conversation)
    cl.user_session.set("options", options)
    cl.user_session.set("dashboard", None)
    await cl.ChatSettings(chat_options.widgets(SETTINGS, options, THINKING_SWITCH, compare=not SETTINGS.engine_urls)).send()
    await cl.context.emitter.set_commands([tokenizer_bench.COMMAND])
    try:
        await engine_with_notice()
    except ChatError:
        return
    await knowledge_with_notice()
    if sidebar_later:
        asyncio.create_task(show_dashboard())
    else:
        await show_dashboard()


async def remember_options() -> None:
    """Store the persona and chat settings with the conversation now: Chainlit itself saves a session's data
    only when its socket closes, which an app that is killed never gets to."""
    session = cl.context.session
    if session.has_first_interaction:
        await STORE.update_thread(session.thread_id, metadata={
            "chat_profile": cl.user_session.get("chat_profile"), "options": cl.user_session.get("options")})


async def engine_with_notice() -> ChatEngine:
    """The engine; while it loads (at start, or again after a failure) a notice in the chat says so."""
    if is_ready():
        return await wait_for_engine()
    notice = cl.Message(content="⏳ 模型加载中，请稍候…  The model is loading, one moment…")
    await notice.send()
    try:
        engine = await wait_for_engine()
    except ChatError as error:
        notice.content = f"❌ {error}"
        await notice.update()
        raise
    notice.content = f"✅ 模型已就绪：{engine.model_name}  The model is ready."
    await notice.update()
    return engine


async def knowledge_with_notice() -> None:
    """While the documents present at start are indexed, a notice in the chat says how far it is."""
    if KNOWLEDGE.ready.is_set():
        return
    def indexing() -> str:
        done, total = KNOWLEDGE.progress.done, KNOWLEDGE.progress.total
        return f"📚 正在为资料建立索引：{done}/{total} 个文件…  Indexing the documents: {done} of {total} files…"

    notice = cl.Message(content=indexing())
    await notice.send()
    while not KNOWLEDGE.ready.is_set():
        await asyncio.sleep(1)
        notice.content = indexing()
        await notice.update()
    notice.content = "✅ 资料已就绪。 The documents are ready."
    await notice.update()


@cl.on_chat_end
async def end_chat() -> None:
    """A closed tab or a lost socket: Chainlit keeps the session's task running, so cancel it here;
    leaving the stream aborts the engine request instead of generating for nobody."""
    task = cl.context.session.current_task
    if task and not task.done():
        task.cancel()


@cl.on_settings_update
async def change_options(proposed: dict) -> None:
    """New settings apply from the next reply; a value out of range is refused and the widgets reset."""
    options, refused = chat_options.checked(SETTINGS, cl.user_session.get("options"), proposed)
    cl.user_session.set("options", options)
    await remember_options()
    if refused:
        await cl.ErrorMessage(content="\n\n".join(refused)).send()
        await cl.ChatSettings(chat_options.widgets(SETTINGS, options, THINKING_SWITCH, compare=not SETTINGS.engine_urls)).send()
    await show_dashboard()


async def show_dashboard() -> None:
    """Open (or re-open) the live statistics sidebar if this session wants it, else close it."""
    if not cl.user_session.get("options")["live_stats"]:
        cl.user_session.set("dashboard", None)
        await cl.ElementSidebar.set_elements([])
        return
    dashboard = cl.user_session.get("dashboard") or Dashboard(GUARD, MEMORY, SETTINGS.sidebar_update_seconds)
    cl.user_session.set("dashboard", dashboard)
    await dashboard.refresh(await wait_for_engine())


@cl.on_message
async def answer(message: cl.Message) -> None:
    # Chainlit runs an edited question outside the session's task, where the stop button would not reach it.
    cl.context.session.current_task = asyncio.current_task()
    if LOGINS and not LOGINS.session_user(cl.context.session.token):
        await cl.ErrorMessage(content="您的登录已失效（用户已删除或密码已更改），请刷新页面重新登录。 Your login has ended "
                                      "(the user was removed or the password changed): reload the page and log in "
                                      "again.").send()
        return
    if message.command == tokenizer_bench.COMMAND["id"]:
        await split_into_tokens(message)
        return
    try:
        engine = await engine_with_notice()
        await knowledge_with_notice()
        GUARD.check()
    except MemoryLowError as error:
        await cl.ErrorMessage(content=str(error)).send()
        if dashboard := cl.user_session.get("dashboard"):
            await dashboard.refresh(engine)  # shows the low-memory warning
        return
    except ChatError as error:
        await cl.ErrorMessage(content=str(error)).send()
        return
    conversation: Conversation = cl.user_session.get("conversation")
    # The replies to the latest question, of which the conversation holds one; the others can be kept instead.
    cl.user_session.set("alternatives", {})
    if conversation.ask(message.id, message.content):
        # An edit: the page dropped what followed the question; the stored thread drops it too.
        await STORE.delete_steps_after(cl.context.session.thread_id, message.id)
    await remember_options()
    options = cl.user_session.get("options")
    sampling = chat_options.sampling(SETTINGS, options)
    persona, found = current_persona(), None  # None: no knowledge base for this reply
    system_prompt = persona.system_prompt
    if options["knowledge"] and KNOWLEDGE.in_use(persona.name):
        system_prompt += RULES  # the same for every reply: the system prompt's prefix stays cached
        # A third of the context for passages, in characters (Qwen's tokenizers take a Chinese character in one token
        # or less); where that does not fit, `start_reply` falls back to fewer.
        found = await asyncio.to_thread(KNOWLEDGE.search, persona.name, conversation.messages(),
                                        SETTINGS.max_model_len // 3)
    events, prompt, found = await start_reply(engine, system_prompt, conversation.messages(), sampling, found)
    async with aclosing(events):
        if isinstance(prompt, Refused):
            conversation.rewind(message.id)
            await STORE.forget_step(cl.context.session.thread_id, message.id)
            await cl.ErrorMessage(content=prompt.message).send()
            return
        if STORE.keep_step(cl.context.session.thread_id, message.id):  # refused before, and now edited to fit
            await message.update()
        if options["teaching"]:
            await show_prompt(prompt, sampling, found)
        async with in_line():  # with Compare on, both replies in one place in line
            if options["compare"] and not SETTINGS.engine_urls:
                await compare_answers(engine, system_prompt, prompt, events, sampling, conversation, found)
            else:
                await stream_answer(engine, prompt, events, sampling, conversation, found or [])
    await tell_if_unsaved()


async def split_into_tokens(message: cl.Message) -> None:
    """The Tokenize command: the text's tokens and counts, from the tokenizers alone. Neither the text nor the
    answer enters the conversation or the stored thread."""
    await STORE.forget_step(cl.context.session.thread_id, message.id)
    try:
        engine = await engine_with_notice()
    except ChatError:
        return  # the notice says why
    tokens = await asyncio.to_thread(engine.tokens, message.content)
    others = {name: await asyncio.to_thread(tokenizer_bench.count_in, folder, message.content)
              for name, folder in OTHER_DEMOS.items()}
    answer = tokenizer_bench.report(message.content, tokens, engine.model_name, others)
    await answer.send()
    await STORE.forget_step(cl.context.session.thread_id, answer.id)


async def labelled(reply: cl.Message, streamed: Streamed, label: str | None) -> cl.CustomElement:
    """The reply's footer; with a `label` (Compare), sent before the reply streams, so the label shows which is which
    meanwhile (which reply's first token comes first is up to the engine). Its figures are filled in at the end."""
    figures = footer(streamed.stats, label)
    if label:
        await figures.send(for_id=reply.id)
    return figures


async def compare_answers(engine: ChatEngine, system_prompt: str, prompt: RenderedPrompt,
                          events: AsyncIterator[ReplyEvent], sampling: Sampling, conversation: Conversation,
                          found: list[Found] | None) -> None:
    """Compare on: the reply with the chat's sampling and one with the second sampling (`chat_options.compared`) to
    the same prompt, streamed at the same time (the engine batches them), each labelled with its sampling. The first
    enters the conversation; the second can be kept instead."""
    second = chat_options.compared(sampling, cl.user_session.get("options"))
    history = conversation.messages()
    other = engine.reply(system_prompt, history if found is None else grounded(history, found), second)
    async with aclosing(other):
        await anext(other)  # the same prompt: the same messages, passages and budget
        await asyncio.gather(
            stream_answer(engine, prompt, events, sampling, conversation, found or [], chat_options.label(sampling)),
            stream_aside(engine, prompt, other, second, "Compared reply", keepable=True,
                         label=chat_options.label(second)))


async def start_reply(engine: ChatEngine, system_prompt: str, history: list, sampling: Sampling,
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


async def tell_if_unsaved() -> None:
    """Tell the visitor, once until it recovers, when the database did not take this conversation."""
    await STORE.settled()
    if not STORE.pending():
        cl.user_session.set("told_unsaved", False)
    elif not cl.user_session.get("told_unsaved"):
        cl.user_session.set("told_unsaved", True)
        await cl.ErrorMessage(content="⚠️ 对话暂时无法保存，服务器恢复后会自动补存；回答不受影响。 This conversation "
                                      "could not be saved just now (the server's log says why); it is saved as soon "
                                      "as the database takes writes again. Answers are not affected.").send()


BUSY = ("这个对话里还有一个回答在进行中：请等它结束，或按停止。 A reply is still being written in this chat: wait for it "
        "to finish, or press Stop.")
NO_LONGER_AVAILABLE = ("这个选择已不可用，请重新提问。 That choice is no longer available (the page is older than the "
                       "session): ask the question again.")


def claim_chat() -> bool:
    """Make the running handler this chat's one generation, which Stop and a closed tab cancel (Chainlit does this
    itself for a question); False while another one runs. Called before any await, so two presses cannot both pass."""
    session = cl.context.session
    running = session.current_task
    if running is not None and not running.done() and running is not asyncio.current_task():
        return False
    session.current_task = asyncio.current_task()
    return True


@asynccontextmanager
async def in_line() -> AsyncIterator[None]:
    """One place in the line of generations (`CHAT_MAX_CONCURRENT_REPLIES`), the visitor told their place meanwhile."""
    notice = QueueNotice()
    try:
        async with GATE.turn(notice.show):
            await notice.remove()
            yield
    finally:
        await notice.remove()  # also when stopped, or the tab closed, while waiting


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


def log_reply(sampling: Sampling, streamed: Streamed, messages: int, kind: str = "Reply") -> None:
    stats = streamed.stats
    log.info("%s: temperature %g, top_p %g, max %d new tokens; prompt %d tokens in %d messages, %d generated, "
             "first token %s s, %s tokens/s, %s, sidebar %s", kind, sampling.temperature, sampling.top_p,
             sampling.max_new_tokens, stats.prompt_tokens, messages, stats.generated_tokens,
             _round(stats.time_to_first_token), _round(stats.decode_tokens_per_second), stats.finish_reason,
             "on" if cl.user_session.get("dashboard") else "off")


async def refresh_dashboard(engine: ChatEngine) -> None:
    if dashboard := cl.user_session.get("dashboard"):
        await dashboard.refresh(engine)


async def stream_answer(engine: ChatEngine, prompt: RenderedPrompt, events: AsyncIterator[ReplyEvent],
                        sampling: Sampling, conversation: Conversation, found: list[Found],
                        label: str | None = None) -> None:
    """Stream one reply into a new message (`stream_into`); keep what was said (also when stopped) in the
    conversation, and never the thinking; name the passages it drew on. `label`: its sampling, with Compare on."""
    reply = cl.Message(content="", metadata={REPLY: {}})
    streamed = Streamed(ReplyStats(prompt_tokens=len(prompt.token_ids)))
    figures = await labelled(reply, streamed, label)
    try:
        await stream_into(reply, engine, events, streamed, SETTINGS.stream_update_seconds)
    finally:
        log_reply(sampling, streamed, len(conversation.turns) - prompt.dropped_messages)
        # A stopped reply stays in the chat and in the conversation as what the assistant said.
        if reply.content:
            conversation.answer(reply.id, reply.content)
            cl.user_session.get("alternatives")[reply.id] = (reply, reply.content)
            figures.props = footer(streamed.stats, label).props
            reply.elements = [figures, *teaching_view(reply, prompt, sampling, streamed.probabilities)]
            reply.metadata[REPLY] = footer_figures(streamed.stats)  # stored with it: elements are not
            if used := drawn_on(found, reply.content, conversation.turns[-2].content):
                reply.content += sources.sources_line(used)
                reply.elements += sources.elements(sources.stored(used))
                reply.metadata[REPLY][SOURCES] = sources.stored(used)
            await reply.update()
        await refresh_dashboard(engine)


def teaching_view(reply: cl.Message, prompt: RenderedPrompt, sampling: Sampling, tokens: list[TokenProbability],
                  branch_from: int | None = None) -> list[cl.CustomElement]:
    """A reply's token view (none without probabilities), whose alternatives' buttons branch from it (`force_token`):
    the last ten of a session's views can."""
    if not tokens:
        return []
    view = token_view(tokens, sampling, branch_from)
    kept = list((cl.user_session.get("branchable") or {}).items())[-9:]
    cl.user_session.set("branchable", {**dict(kept), view.id: Branchable(reply.id, prompt, sampling, tokens)})
    return [view]
REMOTE_TEACHING = ("ℹ️ 模型在 vLLM 服务器上运行（CHAT_ENGINE_URLS）：回答的词元视图、“选下一个词元”和对比暂不可用；分词可用。 "
                   "The model runs on vLLM servers (CHAT_ENGINE_URLS): the reply's token view, choosing the next "
                   "token and Compare are not available with them yet; Tokenize is.\n\n")


async def show_prompt(prompt: RenderedPrompt, sampling: Sampling, found: list[Found] | None) -> None:
    """The teaching view: the passages retrieved (with the knowledge base on) and the exact text the chat template
    produced, special tokens included."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", prompt.text)), default=0))
    view = prompt_view(prompt) if prompt.pieces else None
    if view:  # its button asks for the prompt's probabilities (`weigh_prompt`)
        kept = list((cl.user_session.get("prompt_views") or {}).items())[-9:]  # the last ten prompts can be weighed
        cl.user_session.set("prompt_views", {**dict(kept), view.id: (view, prompt)})
    async with cl.Step(name="提示词 Prompt", type="tool", show_input=False, elements=[view] if view else None) as step:
        step.output = (
            (REMOTE_TEACHING if SETTINGS.engine_urls else "") +
            f"**{len(prompt.token_ids)} tokens** · temperature {sampling.temperature} · top_p {sampling.top_p} · "
            f"top_k {sampling.top_k} · repetition_penalty {sampling.repetition_penalty} · "
            f"max_new_tokens {sampling.max_new_tokens}\n\n"
            f"{'' if found is None else sources.passages_table(found, prompt.text)}{fence}text\n{prompt.text}\n{fence}"
        )


@cl.action_callback(WEIGH_PROMPT)
async def weigh_prompt(action: cl.Action) -> None:
    """The teaching view's button: the prompt's probabilities, one prefill, shown in its token view. A generation like
    any other: the chat's one at a time, a place in the line, the memory check."""
    element = action.payload.get("element")
    view, prompt = (cl.user_session.get("prompt_views") or {}).get(element if isinstance(element, str) else "",
                                                                  (None, None))
    if view is None:
        await cl.ErrorMessage(content=NO_LONGER_AVAILABLE).send()
        return
    if not claim_chat():
        await cl.ErrorMessage(content=BUSY).send()
        return
    try:
        engine = await engine_with_notice()
        GUARD.check()
        async with in_line():
            logprobs = await engine.prompt_logprobs(prompt)
    except ChatError as error:
        await cl.ErrorMessage(content=str(error)).send()
        return
    weighed_prompt(view, logprobs)
    await view.update()


KEEP_REPLY = "keep_reply"  # the button under a reply to the latest question that the conversation does not hold


@cl.action_callback(FORCE_TOKEN)
async def force_token(action: cl.Action) -> None:
    """An alternative's button in a reply's token view: the same reply up to that token, the alternative in its place,
    and the model's continuation, as a branch below. The conversation keeps the reply it holds; a branch of a reply to
    the latest question can take its place (`keep_reply`)."""
    element = action.payload.get("element")
    origin: Branchable | None = (cl.user_session.get("branchable") or {}).get(element if isinstance(element, str) else "")
    chosen = forced(origin.tokens, action.payload) if origin else None
    if chosen is None:
        await cl.ErrorMessage(content=NO_LONGER_AVAILABLE).send()
        return
    if not claim_chat():
        await cl.ErrorMessage(content=BUSY).send()
        return
    index, token = chosen
    try:
        engine = await engine_with_notice()
        GUARD.check()
    except ChatError as error:
        await cl.ErrorMessage(content=str(error)).send()
        return
    # The page shows the stop button and holds questions back meanwhile, as while a reply to a question streams.
    await cl.context.emitter.task_start()
    try:
        async with in_line():
            await stream_branch(engine, origin, index, token)
    finally:
        await cl.context.emitter.task_end()


async def stream_branch(engine: ChatEngine, origin: Branchable, index: int, token: TokenProbability) -> None:
    start = [*(kept.token_id for kept in origin.tokens[:index]), token.token_id]
    async with aclosing(engine.continue_reply(origin.prompt, start, origin.sampling)) as events:
        await stream_aside(engine, origin.prompt, events, origin.sampling, f"Branch from token {index}",
                           keepable=origin.reply_id in (cl.user_session.get("alternatives") or {}),
                           branch=(index, [*origin.tokens[:index], token]))
    await refresh_dashboard(engine)


async def stream_aside(engine: ChatEngine, prompt: RenderedPrompt, events: AsyncIterator[ReplyEvent],
                       sampling: Sampling, kind: str, keepable: bool, label: str | None = None,
                       branch: tuple[int, list[TokenProbability]] | None = None) -> None:
    """A reply the conversation does not hold, streamed into a new message: a branch (`branch`: the index of the
    chosen token, and the tokens up to it), or Compare's second reply (`label`: its sampling), which leaves the
    sidebar to the first. One to the latest question (`keepable`) gets a keep button."""
    aside = cl.Message(content="", metadata={SET_ASIDE: {}})
    streamed = Streamed(ReplyStats(prompt_tokens=len(prompt.token_ids)))
    figures = await labelled(aside, streamed, label)
    try:
        await stream_into(aside, engine, events, streamed, SETTINGS.stream_update_seconds, sidebar=branch is not None)
    finally:
        log_reply(sampling, streamed, len(cl.user_session.get("conversation").turns), kind=kind)
        if aside.content:
            branch_from, before = branch or (None, [])
            figures.props = footer(streamed.stats, label).props
            aside.elements = [figures, *teaching_view(aside, prompt, sampling, [*before, *streamed.probabilities],
                                                      branch_from)]
            aside.metadata[SET_ASIDE] = {**footer_figures(streamed.stats), "branch_from": branch_from}
            if keepable:
                cl.user_session.get("alternatives")[aside.id] = (aside, aside.content)
                aside.actions = [keep_button(aside)]
            await aside.update()


def keep_button(reply: cl.Message) -> cl.Action:
    return cl.Action(name=KEEP_REPLY, payload={"reply": reply.id}, label="保留这个回答 Keep this reply",
                     tooltip="对话从这个回答继续 The conversation goes on from this reply")


@cl.action_callback(KEEP_REPLY)
async def keep_reply(action: cl.Action) -> None:
    """A reply's keep button: it takes the place of the reply the conversation holds for the latest question, there
    and in the stored thread; that one gets the button."""
    alternatives = cl.user_session.get("alternatives") or {}
    conversation: Conversation = cl.user_session.get("conversation")
    held = conversation.turns[-1].message_id if conversation.turns else None
    wanted = action.payload.get("reply")
    chosen = alternatives.get(wanted if isinstance(wanted, str) else "")
    if chosen is None or held not in alternatives:
        await cl.ErrorMessage(content="只能保留最新问题的回答。 Only a reply to the latest question can be kept.").send()
        return
    (reply, text), (previous, _) = chosen, alternatives[held]
    if reply is previous:
        return
    conversation.rewind(previous.id)
    conversation.answer(reply.id, text)
    reply.metadata = {REPLY: reply.metadata.get(SET_ASIDE, {})}
    previous.metadata = {SET_ASIDE: previous.metadata.get(REPLY, {})}
    await reply.remove_actions()
    reply.actions, previous.actions = [], [keep_button(previous)]
    await reply.update()
    await previous.update()


def _round(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
