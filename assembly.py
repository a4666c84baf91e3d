"""The app assembled, once per process: its parts built from the settings and the engine service (`build_app`), then
wired into Chainlit's web server (`serve`): routes, middleware, socket checks, `/metrics`, logins. The one place that
knows both the chat and the web server; `app.py` calls it before Chainlit serves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from chat.parts import ChatApp
from chat.preview import Previewer
from chat.reply_line import ReplyLine
from config.errors import ChatError, cannot
from config.personas import load_personas
from config.settings import Settings, load_settings
from engine.demo_tokenizers import DemoTokenizers
from engine.service import EngineService
from history.schema import open_database
from history.store import ChatStore
from insights.activity import Activity
from insights.days import Days
from insights.report import Insights
from retrieval.grounding import RULES
from retrieval.knowledge_base import KnowledgeBase
from retrieval.library import Library
from telemetry import prometheus
from telemetry.memory import GIB, MemoryFloor, MemoryMonitor
from ui import tokenize_command
from web.auth import Logins
from web.body_limit import limit_bodies
from web.chainlit_patches import require_tested_chainlit
from web.closed_chats import forget_closed_chats
from web.content_policy import apply_content_policy
from web.gate import gate_logins, restrict_origins
from web.health import add_health_routes
from web.hosts import AppNames, answer_only_to
from web.join import add_join_page, announce, listening
from web.language import chinese_first
from web.offline import serve_page_offline
from web.operator import add_operator_page
from web.operator_check import OperatorCheck
from web.operator_edits import Editing
from web.ownership import add_owner_checks
from web.private_files import make_private
from web.socket_guard import guard_socket
from web.widget import remember_origins, request_origin, serve_widget_font


def build_app(settings: Settings, engine: EngineService) -> tuple[ChatApp, Logins | None]:
    """The parts, and the logins (None where CHAT_USERS_FILE is unset); raises `ChatError` saying what to do where
    the settings, a persona or the database do not hold."""
    personas = {persona.name: persona for persona in load_personas(settings.prompts_dir, settings.persona)}
    # Any persona may answer from the operators' documents, with the rules that go with them.
    engine.check_fits({name: persona.system_prompt + RULES for name, persona in personas.items()})
    logins = Logins(settings.users_file, settings.state_dir, settings.login_max_failures,
                    settings.login_lockout_seconds) if settings.users_file else None
    open_database(settings.database)
    knowledge = KnowledgeBase(settings.knowledge_index, settings.knowledge_folder,
                              {name: persona.knowledge for name, persona in personas.items()})
    return ChatApp(settings, engine, personas, ChatStore(settings.database), knowledge,
                   ReplyLine(settings.max_concurrent_replies), MemoryFloor(int(settings.min_available_gib * GIB)),
                   MemoryMonitor(), DemoTokenizers(settings.cache_dir, engine.model),
                   Insights(Days(settings.database, settings.persona), knowledge), request_origin), logins


def built_or_exit() -> tuple[ChatApp, Logins | None]:
    """The app of this process's settings and engine, and its logins, or an exit with one line saying what to do."""
    try:
        require_tested_chainlit()
        settings = load_settings()
        return build_app(settings, EngineService.for_settings(settings))
    except ChatError as error:
        sys.exit(cannot("start", error))


def serve(app: ChatApp, logins: Logins | None) -> None:
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
    add_health_routes(app.engine_service, settings.metrics_token, logins)
    add_join_page(logins is not None)
    check = OperatorCheck(settings.operator_token, logins)
    preview = Previewer(settings, app.engine_service, app.knowledge, app.line, app.floor, app.persona).preview
    editing = Editing(check, Library(settings.knowledge_folder, settings.kept_documents), app.knowledge,
                      Activity(settings.database), preview, list(app.personas), app.insights.report)
    add_operator_page(app.insights.report, check, settings.history_days, editing)
    remember_origins()
    serve_widget_font()
    announce(logins is not None)
    add_owner_checks(app.store, logins)
    forget_closed_chats()
    # The longest question taken: text people write packs fewer than 8 characters into a token, so a longer one
    # could not fit the model's context anyway.
    guard_socket(max_message_chars=8 * settings.max_model_len, logins=logins is not None,
                 thread_exists=app.store.thread_exists, commands=frozenset({tokenize_command.COMMAND["id"]}))
    prometheus.watch(prometheus.LiveReadings(
        running=lambda: app.line.running, waiting=lambda: app.line.waiting,
        kv_cache_usage=lambda: engine.state().kv_cache_usage if (engine := app.engine_service.current()) else 0.0,
        app_pss=lambda: app.memory.read().app_pss, engine_ready=lambda: app.engine_service.status() == "ready",
        restarts=lambda: app.engine_service.restarts,
        servers=lambda: engine.state().servers if (engine := app.engine_service.current()) else (),
        speculation=lambda: (engine.state().proposed, engine.state().accepted) if (engine := app.engine_service.current())
        else (0, 0)))
    if logins:
        os.environ["CHAINLIT_AUTH_SECRET"] = logins.secret  # Chainlit signs its login tokens with it
        gate_logins(logins)
    # Outermost, added last: every response says what the browser may load, and a stranger's name gets nothing.
    apply_content_policy()
    answer_only_to(names)
