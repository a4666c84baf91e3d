"""The app's parts built from settings and a fake engine service, with no globals and no server: the personas and
their profiles, the line, the pipeline's fallback to fewer passages where the context is short, and the keep button's
swap of the reply a conversation holds."""

import asyncio
import logging
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from assembly import build_app
from chat import parts
from chat.background import in_background
from chat.chat_options import initial_options
from chat.reply import render
from chat.session import ChatSession
from config.errors import ConfigError
from config.settings import load_settings
from engine.api import Refused, Sampling
from engine.prompt import RenderedPrompt
from engine.service import Backend, EngineService
from history.conversation import REPLY, SET_ASIDE, Conversation
from retrieval.index import Found
from tests.fake_engine import CharacterTokenizer, FakeEngine

pytestmark = pytest.mark.fast
FAKE = Backend(locate=lambda settings: Path(FakeEngine.model_name), load=FakeEngine.load,
               tokenizer=lambda model: CharacterTokenizer())


def settings_in(folder: Path, **values: str):
    return load_settings({"CHAT_STATE_DIR": str(folder), "CHAT_KNOWLEDGE_DIR": str(folder / "documents"), **values})


def test_the_parts_are_built_from_settings_and_the_engine_handed_in(tmp_path):
    settings = settings_in(tmp_path, CHAT_MAX_CONCURRENT_REPLIES="3")
    app, logins = build_app(settings, EngineService(settings, FAKE))
    assert app.engine_service.model == Path("scripted-fake") and app.engine_service.capabilities.compare
    assert next(iter(app.personas)) == settings.persona and app.persona(None) is app.persona(settings.persona)
    assert [profile.name for profile in app.profiles()] == list(app.personas)
    assert app.line.limit == 3 and logins is None and settings.database.is_file()


def test_a_context_too_short_for_any_persona_stops_the_build_with_what_to_set(tmp_path):
    settings = settings_in(tmp_path, CHAT_MAX_MODEL_LEN="600", CHAT_MAX_NEW_TOKENS="512")
    with pytest.raises(ConfigError, match="CHAT_MAX_MODEL_LEN"):
        build_app(settings, EngineService(settings, FAKE))


def passage(number: int, length: int) -> Found:
    return Found(f"guide/{number}.md", f"第{number}篇", "", "资" * length, 1.0 / number)


@pytest.mark.parametrize("lengths, kept", [((100, 100), 2), ((100, 3000), 1), ((3000, 100), 0), ((3000,), 0)])
async def test_a_reply_takes_the_passages_that_fit_else_the_best_one_else_none(lengths, kept):
    engine = FakeEngine(settings_in(Path("/nonexistent"), CHAT_MAX_MODEL_LEN="2048"))
    found = [passage(number, length) for number, length in enumerate(lengths, 1)]
    events, prompt, used = await render(engine, "你是导游", [{"role": "user", "content": "广州塔多高？"}],
                                             Sampling(0.0, 1.0, 16), found)
    await events.aclose()
    assert isinstance(prompt, RenderedPrompt) and (len(used) if used is not None else 0) == kept
    assert prompt.text.count("资" * 100) == sum(1 for length in lengths[:kept] if length == 100)


async def test_a_question_too_long_with_no_passages_is_refused():
    engine = FakeEngine(settings_in(Path("/nonexistent"), CHAT_MAX_MODEL_LEN="2048"))
    events, prompt, used = await render(engine, "你是导游", [{"role": "user", "content": "长" * 3000}],
                                             Sampling(0.0, 1.0, 16), None)
    await events.aclose()
    assert isinstance(prompt, Refused) and used is None


def test_keep_swaps_the_reply_the_conversation_holds_and_their_marks():
    session = ChatSession(Conversation(), initial_options(load_settings({})))
    session.conversation.ask("q1", "广州塔多高？")
    held = SimpleNamespace(id="r1", metadata={REPLY: {"ttft_s": 0.1}})
    other = SimpleNamespace(id="r2", metadata={SET_ASIDE: {"ttft_s": 0.2, "branch_from": 3}})
    session.conversation.answer("r1", "600米")
    session.alternatives = {"r1": (held, "600米"), "r2": (other, "六百米")}
    assert session.hold("r2") == (other, held)
    assert session.conversation.messages()[-1]["content"] == "六百米"
    assert other.metadata == {REPLY: {"ttft_s": 0.2, "branch_from": 3}} and held.metadata == {SET_ASIDE: {"ttft_s": 0.1}}
    assert session.hold("r1") == (held, other) and session.conversation.turns[-1].message_id == "r1"
    assert session.hold("r9") is None and session.hold(["r1"]) is None
    session.conversation.ask("q2", "还有呢？")  # a newer question: the replies to the last one can no longer be kept
    assert session.hold("r2") is None


async def test_a_task_in_the_background_is_kept_and_its_failure_logged(caplog):
    async def fails():
        raise ValueError("the disk is gone")

    task = in_background(fails(), "Trying something")
    await asyncio.wait([task])
    await asyncio.sleep(0)  # the task's end is handled
    assert "Trying something failed" in caplog.text and "the disk is gone" in caplog.text


async def test_retention_goes_on_after_a_day_it_failed(tmp_path, monkeypatch, caplog):
    app, _ = build_app(settings_in(tmp_path, CHAT_HISTORY_DAYS="30"), EngineService(settings_in(tmp_path), FAKE))
    caplog.set_level(logging.INFO, logger="app")
    tries = []

    def forget_idle(database, days):
        tries.append(days)
        if len(tries) == 1:
            raise sqlite3.OperationalError("database is locked")
        return 2

    async def a_day(seconds):
        if len(tries) == 2:
            raise asyncio.CancelledError  # the app stops
    monkeypatch.setattr(parts, "forget_idle", forget_idle)
    monkeypatch.setattr(parts.asyncio, "sleep", a_day)
    with pytest.raises(asyncio.CancelledError):
        await app._forget_idle_conversations()
    assert tries == [30, 30] and "database is locked" in caplog.text
    assert "deleted 2 conversations" in caplog.text
