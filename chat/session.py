"""One chat's state, one typed object behind one accessor (`current_session`), and what happens to it outside a
reply: a chat opened or resumed, its settings changed, its sidebar shown, a kept reply swapped in.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace

import chainlit as cl
from starlette.requests import cookie_parser

from chat import chat_options
from chat.background import in_background
from chat.chat_options import ChatOptions
from chat.check import show_again
from chat.parts import ChatApp
from chat.waiting import engine_with_notice, knowledge_with_notice
from config.errors import ChatError
from engine.api import ChatEngine, RenderedPrompt, ReplyStats
from history.conversation import REPLY, SET_ASIDE, Conversation
from ui import tokenize_command
from ui.notices import send_error
from ui.stats_panel import StatsPanel
from ui.token_view import Branchable, Recent

KEY = "chat"  # the session's `ChatSession` in `cl.user_session`
NARROW_SCREEN = "narrow_screen"  # the page's cookie: "1" where its side view lies over the chat (public/layout.js)

log = logging.getLogger(__name__)


@dataclass
class ChatSession:
    conversation: Conversation
    options: ChatOptions
    stats_panel: StatsPanel | None = None  # the live statistics sidebar, while it is on
    # The replies to the latest question by id, with their text: the conversation holds one, the others can be kept.
    alternatives: dict[str, tuple[cl.Message, str]] = field(default_factory=dict)
    branchable: Recent[Branchable] = field(default_factory=Recent)  # replies' token views
    prompt_views: Recent[tuple[cl.CustomElement, RenderedPrompt]] = field(default_factory=Recent)
    told_unsaved: bool = False  # the visitor was told the database did not take the conversation
    side_over_chat: bool = False  # the side view opens over the chat (a phone's sheet, the widget's dialog)
    last_reply: ReplyStats | None = None  # the latest reply's figures, for statistics opened by a tap

    @property
    def profile(self) -> str | None:
        """The persona this chat talks with: Chainlit's chat profile, chosen on the page (or by the widget's site)."""
        return cl.user_session.get("chat_profile")

    @classmethod
    def on_screen(cls, conversation: Conversation, options: ChatOptions) -> ChatSession:
        """A chat on this visitor's screen: where the side view would cover the chat (on a narrow screen, as a sheet;
        in the widget on a host site, as a dialog) the live statistics start closed, one tap away under each reply.
        The page decides by its width, as Chainlit's layout does, and says so in a cookie (`public/layout.js`) before
        the socket opens; without it (scripts blocked), a phone's browser says "Mobi" in its user agent."""
        environ = cl.context.session.environ
        narrow = cookie_parser(environ.get("HTTP_COOKIE", "")).get(NARROW_SCREEN)
        over = widget_origin() is not None or (narrow == "1" if narrow else "Mobi" in environ.get("HTTP_USER_AGENT", ""))
        return cls(conversation, replace(options, live_stats=False) if over else options, side_over_chat=over)

    def hold(self, wanted: object) -> tuple[cl.Message, cl.Message] | None:
        """Make the reply `wanted` the one the conversation holds for the latest question, in place of the one it
        held (their marks swapped); the two, or None where `wanted` is not a reply to the latest question."""
        held = self.conversation.turns[-1].message_id if self.conversation.turns else None
        chosen = self.alternatives.get(wanted) if isinstance(wanted, str) else None
        if chosen is None or held not in self.alternatives:
            return None
        (reply, text), (previous, _) = chosen, self.alternatives[held]
        if reply is not previous:
            self.conversation.rewind(previous.id)
            self.conversation.answer(reply.id, text)
            reply.metadata = {REPLY: reply.metadata.get(SET_ASIDE, {})}
            previous.metadata = {SET_ASIDE: previous.metadata.get(REPLY, {})}
        return reply, previous


def widget_origin() -> str | None:
    """The host site's origin where this chat is the widget's, else None (the app's own page)."""
    if cl.context.session.client_type != "copilot":
        return None
    return cl.context.session.environ.get("HTTP_ORIGIN", "")


def current_session() -> ChatSession | None:
    """This chat's state; None before the chat is opened (a crafted client can press a button that early)."""
    return cl.user_session.get(KEY)


async def open_chat(app: ChatApp) -> None:
    if (origin := widget_origin()) is not None:  # the widget, on a host site's page
        if name := app.widget_persona(origin):
            cl.context.session.chat_profile = name  # what `cl.user_session` then reads as "chat_profile"
        log.info("Widget chat from %s: persona %s", origin, cl.user_session.get("chat_profile") or app.settings.persona)
    persona = app.persona(cl.user_session.get("chat_profile"))
    await _open(app, ChatSession.on_screen(Conversation(), chat_options.initial_options(app.settings, persona)))


async def resume_chat(app: ChatApp, thread: dict) -> None:
    """A stored conversation opened again: the model's context is its stored questions and replies, with the
    persona (Chainlit restores the chat profile) and chat settings it had."""
    stored = (thread.get("metadata") or {}).get("options") or {}
    persona = app.persona(cl.user_session.get("chat_profile"))
    options, _ = chat_options.checked(app.settings, chat_options.initial_options(app.settings, persona), stored)
    # Chainlit sends the stored thread to the page after this handler, and the page then starts afresh:
    # the sidebar follows in a task of its own, after that.
    session = ChatSession.on_screen(Conversation.from_steps(thread["steps"]), options)
    await _open(app, session, sidebar_later=True)
    in_background(_sources_again(session, thread["steps"]), "Showing a resumed chat's sources")


async def _sources_again(session: ChatSession, steps: list[dict]) -> None:
    await show_again(steps)
    await leave_closed(session)


async def _open(app: ChatApp, session: ChatSession, sidebar_later: bool = False) -> None:
    cl.user_session.set(KEY, session)
    await send_settings(app, session.options)
    await cl.context.emitter.set_commands([tokenize_command.COMMAND])
    try:
        await engine_with_notice(app.engine_service)
    except ChatError:
        return
    await knowledge_with_notice(app.knowledge)
    if sidebar_later:
        in_background(show_stats_panel(app), "Opening a resumed chat's statistics")
    else:
        await show_stats_panel(app)


async def send_settings(app: ChatApp, options: ChatOptions) -> None:
    """The settings dialog, with what the model and the engine can do."""
    await cl.ChatSettings(chat_options.widgets(app.settings, options, app.engine_service.thinking_switch,
                                               compare=app.engine_service.capabilities.compare)).send()


async def change_options(app: ChatApp, proposed: dict) -> None:
    """New settings apply from the next reply; a value out of range is refused and the widgets reset."""
    session = current_session()
    session.options, refused = chat_options.checked(app.settings, session.options, proposed)
    await remember_options(app, session)
    if refused:
        await send_error("\n\n".join(refused))
        await send_settings(app, session.options)
    await show_stats_panel(app)


async def remember_options(app: ChatApp, session: ChatSession) -> None:
    """Store the persona and chat settings with the conversation now: Chainlit itself saves a session's data
    only when its socket closes, which an app that is killed never gets to."""
    if cl.context.session.has_first_interaction:
        await app.store.update_thread(cl.context.session.thread_id, metadata={
            "chat_profile": session.profile, "options": asdict(session.options)})


async def show_stats_panel(app: ChatApp) -> None:
    """Open (or re-open) the live statistics sidebar if this session wants it, else close it."""
    session = current_session()
    if not session.options.live_stats:
        session.stats_panel = None
        await cl.ElementSidebar.set_elements([])
        return
    session.stats_panel = session.stats_panel or StatsPanel(app.memory_figures, app.settings.sidebar_update_seconds)
    await session.stats_panel.refresh(await app.engine_service.wait())


async def leave_closed(session: ChatSession) -> None:
    """On a phone or in the widget, close what Chainlit's page opened by itself over the chat: it opens the side view on
    every new side element (a reply's sources). A tap on a source's name opens it again."""
    if session.side_over_chat:
        await cl.ElementSidebar.set_elements([])


async def open_stats_panel(app: ChatApp) -> None:
    """The statistics as they are now, opened by a tap (the footer's button) whether or not they follow the replies."""
    session = current_session()
    if session is not None:
        stats_panel = session.stats_panel or StatsPanel(app.memory_figures, app.settings.sidebar_update_seconds)
        stats_panel.last_reply = stats_panel.last_reply or session.last_reply
        await stats_panel.refresh(await app.engine_service.wait())


async def refresh_stats_panel(session: ChatSession, engine: ChatEngine) -> None:
    if session.stats_panel:
        await session.stats_panel.refresh(engine)
