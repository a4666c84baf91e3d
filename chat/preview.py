"""What a visitor would get for a question, for the operator's "try a question": the passages the search finds, the
message the model reads (the question with the sentences of those passages, as a reply's prompt holds it), the
app's own reply where the passages do not answer it and, when asked, the reply the guide gives at a new chat's
settings, generated in the line of replies like a visitor's. Nothing is stored, so the usage figures never count it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chat.reply_line import ReplyLine
from chat.script import in_their_script
from config.cantonese import as_the_model_reads
from config.errors import ChatError
from config.message import Message
from config.personas import Persona
from config.settings import Settings
from engine.api import Finished, Refused, Sampling, TextDelta
from engine.service import EngineService
from retrieval.grounding import ECHOES, RULES, asks, grounded, not_covered, unanswered
from retrieval.knowledge_base import KnowledgeBase
from telemetry.memory import MemoryFloor


@dataclass
class Preview:
    question: str
    persona: str
    passages: list[dict] = field(default_factory=list)  # source, title, section, sentences (given), passage (whole)
    reads: str = ""  # the question as the model reads it, its passages before it
    said_by_app: str = ""  # the app's own reply, where the passages found do not answer the question
    reply: str | None = None  # the guide's reply, when asked for (or the app's own)
    seconds: float | None = None


@dataclass(frozen=True)
class Previewer:
    """The app's parts a preview uses (`chat.parts` builds it)."""

    settings: Settings
    engine_service: EngineService
    knowledge: KnowledgeBase
    line: ReplyLine
    floor: MemoryFloor
    persona: Callable[[str | None], Persona]

    async def preview(self, question: str, persona_name: str | None, with_reply: bool) -> Preview:
        """Raises `ChatError` (the engine not loaded, memory low) only when the reply is asked for."""
        persona = self.persona(persona_name)
        history = [{"role": "user", "content": question}]
        shown = as_the_model_reads(history)  # written Cantonese in Mandarin's words
        result = Preview(question, persona.name)
        found, system_prompt, engine = None, persona.system_prompt, self.engine_service.current()
        await asyncio.to_thread(self.knowledge.ready.wait)  # the first indexing pass, as a visitor's question waits
        if self.knowledge.in_use(persona.name):
            system_prompt += RULES
            length = len if engine is None else (lambda text: len(engine.tokens(text)))  # as a reply counts them
            found = await asyncio.to_thread(self.knowledge.search, persona.name, shown,
                                            self.settings.max_model_len // 3, length)
            result.passages = [{"source": passage.name, "title": passage.title, "section": passage.section,
                                "sentences": passage.text, "passage": passage.whole or passage.text}
                               for passage in found]
            result.reads = grounded(shown, found)[-1]["content"]
            if found and asks(question) and await asyncio.to_thread(unanswered, found, shown[-1]["content"]):
                result.said_by_app = in_their_script(not_covered(question, found), question)
        if with_reply:
            started = time.perf_counter()
            result.reply = result.said_by_app or await self._reply(
                system_prompt, shown if found is None else grounded(shown, found),
                self.settings.sampling_defaults(persona.temperature, persona.top_p), question)
            result.seconds = round(time.perf_counter() - started, 1)
        return result


    async def _reply(self, system_prompt: str, history: list[Message], defaults: tuple[float, float],
                     question: str) -> str:
        if not self.engine_service.is_ready():
            raise ChatError("模型还在加载。The model is still loading: try again in a minute.")
        engine = await self.engine_service.wait()
        self.floor.check()
        temperature, top_p = defaults
        sampling = Sampling(temperature, top_p, self.settings.max_new_tokens, self.settings.top_k,
                            self.settings.repetition_penalty, stop=ECHOES)
        text = []
        async with self.line.place(_no_notice):
            async for event in engine.reply(system_prompt, history, sampling):
                if isinstance(event, Refused):
                    return event.message
                if isinstance(event, TextDelta) and event.kind == "answer":
                    text.append(event.text)
                if isinstance(event, Finished):
                    break
        return in_their_script("".join(text), question)


async def _no_notice(place: int) -> None:
    """The operator waits in line without a notice: the page answers once the reply is whole."""
