"""The app's parts, built once per process by `build_app(settings, engine)` from its settings and its engine service:
the personas, logins, the conversation store, the knowledge base, the line of replies, the memory floor and monitor,
the other demos' tokenizers. `serve_app` then wires them into Chainlit's web server (routes, middleware, socket
checks, `/metrics`), and `ChatApp.start`/`stop` run with the server. A test builds the same parts with a fake engine
service and no globals (`tests/test_chat_parts.py`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import chainlit as cl

from chat.background import in_background
from chat.preview import Previewer
from chat.reply_queue import ReplyQueue
from config.errors import ChatError, cannot
from config.personas import Persona, load_personas
from config.settings import Settings, load_settings
from engine.demo_tokenizers import DemoTokenizers
from engine.service import EngineService
from history.records import forget_idle
from history.schema import open_database
from history.store import ChatStore
from insights.activity import Activity
from insights.days import History
from insights.report import Insights
from retrieval.grounding import RULES
from retrieval.knowledge_base import KnowledgeBase
from retrieval.library import Library
from telemetry import prometheus
from telemetry.memory import GIB, MemoryFloor, MemoryMonitor
from ui import tokenize_command
from ui.language import chinese_first
from ui.offline import serve_page_offline
from web.auth import Logins
from web.body_limit import limit_bodies
from web.closed_chats import forget_closed_chats
from web.content_policy import apply_content_policy
from web.gate import gate_logins, restrict_origins
from web.health import add_health_routes
from web.hosts import AppNames, answer_only_to
from web.join import add_join_page, announce, listening
from web.operator import add_operator_page
from web.operator_check import OperatorCheck
from web.operator_edits import Editing
from web.ownership import add_owner_checks
from web.private_files import make_private
from web.socket_guard import guard_socket
from web.widget import remember_origins, request_origin, serve_widget_font

log = logging.getLogger("app")


@dataclass(frozen=True)
class ChatApp:
    settings: Settings
    engine: EngineService
    personas: dict[str, Persona]  # by name; the first is the default
    logins: Logins | None  # None: no logins (CHAT_USERS_FILE unset)
    store: ChatStore
    knowledge: KnowledgeBase
    queue: ReplyQueue
    floor: MemoryFloor
    memory: MemoryMonitor
    demo_tokenizers: DemoTokenizers
    insights: Insights

    def persona(self, name: str | None) -> Persona:
        return self.personas.get(name or "", next(iter(self.personas.values())))

    def widget_persona(self, origin: str) -> str | None:
        """The persona whose file names `origin` (a host site's) in `widget_origins`, if one does."""
        return next((persona.name for persona in self.personas.values() if origin in persona.widget_origins), None)

    def profiles(self) -> list[cl.ChatProfile]:
        """The personas as Chainlit's chat profiles; to the widget on a host site with a persona of its own (the origin
        of the request that asks), that one alone."""
        personas = list(self.personas.values())
        if own := self.widget_persona(request_origin()):
            personas = [self.personas[own]]
        return [cl.ChatProfile(name=persona.name, display_name=persona.display_name,
                               markdown_description=persona.description, icon=f"/public/avatars/{persona.name}.svg",
                               default=index == 0, starters=[cl.Starter(label=starter.label, message=starter.message)
                                                             for starter in persona.starters])
                for index, persona in enumerate(personas)]

    def start(self) -> None:
        """With the web server: load the engine and index the documents in the background, read the last year's
        days for the operator's page, forget idle conversations (`CHAT_HISTORY_DAYS`) at start and then once a day."""
        self.engine.start()
        self.knowledge.start()
        if self.settings.operator_token or self.logins:
            in_background(asyncio.to_thread(self.insights.history.read_ahead), "Reading the operator's days ahead")
        if self.settings.history_days:
            in_background(self._forget_idle_conversations(), "Retention")

    async def _forget_idle_conversations(self) -> None:
        days = self.settings.history_days
        while True:
            try:
                forgotten = await asyncio.to_thread(forget_idle, self.settings.database, days)
                log.info("Retention: deleted %d conversations idle for more than %d days", forgotten, days)
            except Exception:  # a locked or damaged database: said in the log, tried again tomorrow
                log.exception("Retention: deleting idle conversations failed; the next try is in a day")
            await asyncio.sleep(24 * 3600)

    async def stop(self) -> None:
        await asyncio.to_thread(self.engine.shutdown)


def build_app(settings: Settings, engine: EngineService) -> ChatApp:
    """The parts; raises `ChatError` saying what to do where the settings, a persona or the database do not hold."""
    personas = {persona.name: persona for persona in load_personas(settings.prompts_dir, settings.persona)}
    # Any persona may answer from the operators' documents, with the rules that go with them.
    engine.check_fits({name: persona.system_prompt + RULES for name, persona in personas.items()})
    logins = Logins(settings.users_file, settings.state_dir, settings.login_max_failures,
                    settings.login_lockout_seconds) if settings.users_file else None
    open_database(settings.database)
    knowledge = KnowledgeBase(settings.knowledge_index, settings.knowledge_folder,
                              {name: persona.knowledge for name, persona in personas.items()})
    return ChatApp(settings, engine, personas, logins, ChatStore(settings.database), knowledge,
                   ReplyQueue(settings.max_concurrent_replies), MemoryFloor(int(settings.min_available_gib * GIB)),
                   MemoryMonitor(), DemoTokenizers(settings.cache_dir, engine.model),
                   Insights(History(settings.database, settings.persona), knowledge))


def built_or_exit() -> ChatApp:
    """The app of this process's settings and engine, or an exit with one line saying what to do."""
    try:
        settings = load_settings()
        return build_app(settings, EngineService.for_settings(settings))
    except ChatError as error:
        sys.exit(cannot("start", error))


def serve_app(app: ChatApp) -> None:
    """Wire the parts into Chainlit's web server: private files, the proxies believed, the page offline and Chinese
    first, the origins and body limits, health and metrics, the join page, the operator's page (and the addresses
    printed), the widget's host sites and font, owner checks, closed chats forgotten, the socket's checks, the login
    gate, the content policy and the names the app answers to."""
    settings = app.settings
    make_private(settings.state_dir, [path for path in (settings.users_file, settings.database, Path(".env")) if path])
    # Uvicorn, which Chainlit starts after importing the app, believes X-Forwarded-* only from these addresses.
    os.environ["FORWARDED_ALLOW_IPS"] = ",".join(settings.trusted_proxies)
    names = AppNames(settings.allowed_hosts, settings.allowed_origins, listening()[0])
    serve_page_offline()
    chinese_first()
    restrict_origins(settings.allowed_origins, names)
    limit_bodies(settings.max_upload_mb)
    add_health_routes(app.engine, settings.metrics_token, app.logins)
    add_join_page(app.logins is not None)
    check = OperatorCheck(settings.operator_token, app.logins)
    editing = Editing(check, Library(settings.knowledge_folder, settings.kept_documents), app.knowledge,
                      Activity(settings.database), Previewer(settings, app.engine, app.knowledge, app.queue, app.floor, app.persona).preview, list(app.personas),
                      app.insights.report)
    add_operator_page(app.insights.report, check, settings.history_days, editing)
    remember_origins()
    serve_widget_font()
    announce(app.logins is not None)
    add_owner_checks(app.store, app.logins)
    forget_closed_chats()
    # The longest question taken: text people write packs fewer than 8 characters into a token, so a longer one
    # could not fit the model's context anyway.
    guard_socket(max_message_chars=8 * settings.max_model_len, logins=app.logins is not None,
                 thread_exists=app.store.thread_exists, commands=frozenset({tokenize_command.COMMAND["id"]}))
    prometheus.watch(prometheus.LiveReadings(
        running=lambda: app.queue.running, waiting=lambda: app.queue.waiting,
        kv_cache_usage=lambda: engine.state().kv_cache_usage if (engine := app.engine.current()) else 0.0,
        app_pss=lambda: app.memory.read().app_pss, engine_ready=lambda: app.engine.status() == "ready",
        restarts=lambda: app.engine.restarts,
        servers=lambda: engine.state().servers if (engine := app.engine.current()) else (),
        speculation=lambda: (engine.state().proposed, engine.state().accepted) if (engine := app.engine.current())
        else (0, 0)))
    if app.logins:
        os.environ["CHAINLIT_AUTH_SECRET"] = app.logins.secret  # Chainlit signs its login tokens with it
        gate_logins(app.logins)
    # Outermost, added last: every response says what the browser may load, and a stranger's name gets nothing.
    apply_content_policy()
    answer_only_to(names)
