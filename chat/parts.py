"""The parts a chat uses, built once per process (`assembly.build_app`) from the settings and the engine service: the
personas, the conversation store, the knowledge base, the line of replies, the memory floor and monitor, the other
demos' tokenizers, the operator's figures. `ChatApp.start`/`stop` run with the web server. A test builds the same parts
with a fake engine service and no globals (`tests/test_chat_parts.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import chainlit as cl

from chat.background import in_background
from chat.reply_line import ReplyLine
from config.personas import Persona
from config.settings import Settings
from engine.demo_tokenizers import DemoTokenizers
from engine.service import EngineService
from history.records import forget_idle
from history.store import ChatStore
from insights.report import Insights
from retrieval.knowledge_base import KnowledgeBase
from telemetry.memory import MemoryFloor, MemoryMonitor, memory_figures

log = logging.getLogger("app")


@dataclass(frozen=True)
class ChatApp:
    settings: Settings
    engine_service: EngineService
    personas: dict[str, Persona]  # by name; the first is the default
    store: ChatStore
    knowledge: KnowledgeBase
    line: ReplyLine
    floor: MemoryFloor
    memory: MemoryMonitor
    demo_tokenizers: DemoTokenizers
    insights: Insights
    request_origin: Callable[[], str] = lambda: ""  # the Origin of the HTTP request being answered (the web server's)

    def memory_figures(self) -> dict:
        """The sidebar's memory figures, read now (blocks: run it off the event loop)."""
        return memory_figures(self.memory.read(), self.floor)

    def persona(self, name: str | None) -> Persona:
        return self.personas.get(name or "", next(iter(self.personas.values())))

    def widget_persona(self, origin: str) -> str | None:
        """The persona whose file names `origin` (a host site's) in `widget_origins`, if one does."""
        return next((persona.name for persona in self.personas.values() if origin in persona.widget_origins), None)

    def profiles(self) -> list[cl.ChatProfile]:
        """The personas as Chainlit's chat profiles; to the widget on a host site with a persona of its own (the origin
        of the request that asks), that one alone."""
        personas = list(self.personas.values())
        if own := self.widget_persona(self.request_origin()):
            personas = [self.personas[own]]
        return [cl.ChatProfile(name=persona.name, display_name=persona.display_name,
                               markdown_description=persona.description, icon=f"/public/avatars/{persona.name}.svg",
                               default=index == 0, starters=[cl.Starter(label=starter.label, message=starter.message)
                                                             for starter in persona.starters])
                for index, persona in enumerate(personas)]

    def start(self) -> None:
        """With the web server: load the engine and index the documents in the background, read the last year's
        days for the operator's page, forget idle conversations (`CHAT_HISTORY_DAYS`) at start and then once a day."""
        self.engine_service.start()
        self.knowledge.start()
        if self.settings.operator_token or self.settings.users_file:
            in_background(asyncio.to_thread(self.insights.days.read_ahead), "Reading the operator's days ahead")
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
        await asyncio.to_thread(self.engine_service.shutdown)
