"""Stored conversations without a server: the schema made and upgraded in place, Chainlit's data layer on it
(JSON in and out, only known columns, a backlog while the database refuses writes), a conversation rebuilt
from stored steps and rewound by an edit, retention and the export command."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

import history.store as store_module
from config.errors import HistoryError
from history.conversation import (
    APPENDED,
    BY_APP,
    FINISH,
    REPLY,
    SOURCES,
    SOURCES_MARK,
    UNCHECKED,
    UNSUPPORTED_MARK,
    Conversation,
    model_text,
)
from history.records import forget_idle, read_records
from history.schema import SCHEMA_VERSION, TABLES, open_database
from tests.support import ROOT, new_store, step

pytestmark = pytest.mark.fast


# The SQLAlchemy data layer's schema as Chainlit's documentation gives it (less the columns 2.12 also writes).
DOCUMENTED_STEPS = ('CREATE TABLE steps ("id" TEXT PRIMARY KEY, "name" TEXT NOT NULL, "type" TEXT NOT NULL, '
                    '"threadId" TEXT NOT NULL, "parentId" TEXT, "streaming" BOOLEAN NOT NULL, "waitForAnswer" BOOLEAN, '
                    '"isError" BOOLEAN, "metadata" TEXT, "tags" TEXT, "input" TEXT, "output" TEXT, "createdAt" TEXT, '
                    '"start" TEXT, "end" TEXT, "generation" TEXT, "showInput" TEXT, "language" TEXT, "indent" INT)')


def test_the_schema_is_made_then_an_older_database_upgraded_in_place(tmp_path):
    database = tmp_path / "chat.db"
    with sqlite3.connect(database) as connection:
        connection.execute(DOCUMENTED_STEPS)
        connection.execute('INSERT INTO steps ("id", "name", "type", "threadId", "streaming", "output") '
                           "VALUES ('s1', 'User', 'user_message', 't1', 0, '早上好')")
    open_database(database)
    open_database(database)  # again: nothing changes
    with sqlite3.connect(database) as connection:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(steps)")}
        assert set(TABLES["steps"]) <= columns and {"defaultOpen", "autoCollapse", "command", "modes"} <= columns
        assert connection.execute("SELECT output FROM steps").fetchall() == [("早上好",)]  # kept
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")} == set(TABLES)


def test_a_file_that_is_not_a_database_is_named_with_what_to_do(tmp_path):
    (tmp_path / "chat.db").write_bytes(b"this is not SQLite " * 500)
    with pytest.raises(HistoryError, match=r"chat.db is not a usable SQLite database .*Move the file away"):
        open_database(tmp_path / "chat.db")


def test_a_conversation_is_rebuilt_from_questions_and_replies_only():
    thread = "t"
    steps = [step(thread, "run", "", "2026-11-30T10:00:00.000Z"),
             step(thread, "user_message", "第一个问题", "2026-11-30T10:00:01.000Z"),
             step(thread, "assistant_message", "⏳ 模型加载中", "2026-11-30T10:00:00.500Z"),  # a notice
             step(thread, "tool", "<|im_start|>system", "2026-11-30T10:00:02.000Z"),  # the teaching step
             step(thread, "assistant_message", "第一个回答", "2026-11-30T10:00:03.000Z", reply={"generated_tokens": 9}),
             step(thread, "user_message", "第二个问题", "2026-11-30T10:00:04.000Z"),
             step(thread, "assistant_message", "Task manually stopped.", "2026-11-30T10:00:05.000Z"),
             step(thread, "assistant_message", "半个回", "2026-11-30T10:00:04.500Z", reply={})]  # stopped, kept
    conversation = Conversation.from_steps(steps)
    assert conversation.messages() == [{"role": "user", "content": "第一个问题"},
                                       {"role": "assistant", "content": "第一个回答"},
                                       {"role": "user", "content": "第二个问题"},
                                       {"role": "assistant", "content": "半个回"}]


def test_the_model_is_not_shown_a_question_the_app_answered_itself_nor_its_reply():
    steps = [step("t", "user_message", "沙面有多少棵树？", "2026-11-30T10:00:01.000Z"),
             step("t", "assistant_message", "资料里没有这方面的信息。", "2026-11-30T10:00:02.000Z",
                  reply={FINISH: BY_APP, APPENDED: 0}),
             step("t", "user_message", "沙面在哪个区？", "2026-11-30T10:00:03.000Z"),
             step("t", "assistant_message", "荔湾区。", "2026-11-30T10:00:04.000Z", reply={FINISH: "stop"})]
    conversation = Conversation.from_steps(steps)
    assert [message["content"] for message in conversation.messages()] == [item["output"] for item in steps]
    assert conversation.model_messages() == [{"role": "user", "content": "沙面在哪个区？"},
                                             {"role": "assistant", "content": "荔湾区。"}]


def test_the_lines_under_a_reply_are_not_what_the_model_said():
    under = SOURCES_MARK + "广州塔 · 简介" + UNSUPPORTED_MARK + "384 米"
    steps = [step("t", "user_message", "广州塔有多高？", "2026-11-30T10:00:01.000Z"),
             step("t", "assistant_message", "高 384 米。" + under, "2026-11-30T10:00:02.000Z",
                  reply={SOURCES: [{"label": "广州塔 · 简介"}], APPENDED: len(under)}),
             step("t", "user_message", "电梯呢？", "2026-11-30T10:00:03.000Z"),
             step("t", "assistant_message", "由某公司制造。" + UNCHECKED, "2026-11-30T10:00:04.000Z",
                  reply={APPENDED: len(UNCHECKED)}),
             step("t", "user_message", "门票呢？", "2026-11-30T10:00:05.000Z"),  # stored before the check
             step("t", "assistant_message", "150 元。" + SOURCES_MARK + "广州塔 · 门票", "2026-11-30T10:00:06.000Z",
                  reply={SOURCES: [{"label": "广州塔 · 门票"}]})]
    replies = [message["content"] for message in Conversation.from_steps(steps).messages()[1::2]]
    assert replies == ["高 384 米。", "由某公司制造。", "150 元。"]
    assert [model_text(step["output"]) for step in steps[1::2]] == replies  # what a reader of the page gets


def test_asking_again_under_an_earlier_id_rewinds_to_it():
    conversation = Conversation()
    for index in range(3):
        assert not conversation.ask(f"q{index}", f"question {index}")
        conversation.answer(f"a{index}", f"answer {index}")
    assert conversation.ask("q0", "question 0, edited")
    assert conversation.messages() == [{"role": "user", "content": "question 0, edited"}]


async def test_the_store_writes_json_and_known_columns_and_reads_them_back(tmp_path):
    database = tmp_path / "chat.db"
    open_database(database)
    store = new_store(database)
    thread = str(uuid.uuid4())
    await store.update_thread(thread, name="广州一日游", tags=["tour_guide"], metadata={"options": {"temperature": 0.3}})
    await store.create_step(step(thread, "user_message", "推荐景点", "2026-11-30T10:00:01.000Z"))
    await store.create_step(step(thread, "assistant_message", "白云山", "2026-11-30T10:00:02.000Z", reply={"ttft_s": 0.1}))
    stored = await store.get_thread(thread)
    assert stored["tags"] == ["tour_guide"] and stored["metadata"]["options"] == {"temperature": 0.3}
    assert [(item["output"], item["metadata"]) for item in stored["steps"]] == [
        ("推荐景点", {}), ("白云山", {REPLY: {"ttft_s": 0.1}})]
    assert store.pending() == 0
    await store.close()


async def hold_write_lock(database, seconds: float) -> None:
    """Another connection holds the database's write lock for a while, as a backup or a stuck writer would."""
    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute("BEGIN EXCLUSIVE")
    await asyncio.sleep(seconds)
    connection.execute("COMMIT")
    connection.close()


async def test_writes_refused_while_the_database_is_locked_wait_and_land_in_order(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(store_module, "RETRY_INTERVAL", 0.2)
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.5)  # the lock below lasts longer
    database = tmp_path / "chat.db"
    open_database(database)
    store = new_store(database)
    thread = str(uuid.uuid4())
    await store.update_thread(thread, name="t")
    lock = asyncio.create_task(hold_write_lock(database, 3))
    await asyncio.sleep(0.2)
    steps = [step(thread, "user_message", f"问题 {index}", f"2026-11-30T10:00:0{index}.000Z") for index in range(3)]
    for item in steps:
        await store.create_step(item)
    await store.settled()
    assert store.pending() >= 3  # the steps, and whatever the data layer wrote with them
    assert "could not be saved (database is locked)" in caplog.text
    await lock
    for _ in range(50):
        if not store.pending():
            break
        await asyncio.sleep(0.1)
    assert store.pending() == 0
    assert [item["output"] for item in (await store.get_thread(thread))["steps"]] == ["问题 0", "问题 1", "问题 2"]
    await store.close()


async def test_a_read_only_or_full_database_keeps_the_writes_too(tmp_path, caplog):
    database = tmp_path / "chat.db"
    open_database(database)
    store = new_store(database)

    @event.listens_for(store.engine.sync_engine, "connect")
    def no_room_left(connection, record):
        cursor = connection.cursor()
        cursor.execute("PRAGMA max_page_count = 1")  # no page more than the file has: SQLite says the disk is full
        cursor.close()

    await store.update_thread(str(uuid.uuid4()), name="t", metadata={"filler": "导" * 100_000})
    assert store.pending() == 1
    await store.close()

    read_only = new_store(database)
    read_only.engine = create_async_engine(f"sqlite+aiosqlite:///file:{database}?mode=ro&uri=true")
    read_only.async_session.configure(bind=read_only.engine)
    await read_only.update_thread(str(uuid.uuid4()), name="t")
    assert read_only.pending() == 1
    assert "attempt to write a readonly database" in caplog.text and "database or disk is full" in caplog.text
    await read_only.close()


def test_retention_deletes_only_conversations_idle_longer_than_the_limit(tmp_path):
    database = tmp_path / "chat.db"
    open_database(database)
    with sqlite3.connect(database) as connection:
        for thread, created, last_step in (("old", "2026-09-01T08:00:00.000Z", "2026-09-02T08:00:00.000Z"),
                                           ("revived", "2026-09-01T08:00:00.000Z", "2026-11-29T08:00:00.000Z"),
                                           ("new", "2026-11-28T08:00:00.000Z", None)):
            connection.execute('INSERT INTO threads ("id", "createdAt", "metadata") VALUES (?, ?, ?)',
                               (thread, created, "{}"))
            if last_step:
                connection.execute('INSERT INTO steps ("id", "name", "type", "threadId", "streaming", "createdAt") '
                                   "VALUES (?, 'User', 'user_message', ?, 0, ?)", (f"{thread}-step", thread, last_step))
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert forget_idle(database, 30, now) == 1
    with sqlite3.connect(database) as connection:
        assert {row[0] for row in connection.execute("SELECT id FROM threads")} == {"revived", "new"}
        assert {row[0] for row in connection.execute('SELECT "threadId" FROM steps')} == {"revived"}
    assert forget_idle(database, 30, now) == 0


def test_the_export_command_writes_markdown_and_json_in_order_with_chinese_intact(tmp_path):
    database = tmp_path / "chat.db"
    open_database(database)
    with sqlite3.connect(database) as connection:
        for thread, user, day in (("a", "alice", "2026-11-01"), ("b", "bob", "2026-11-20")):
            connection.execute('INSERT INTO threads ("id", "name", "userIdentifier", "createdAt", "metadata") '
                               "VALUES (?, ?, ?, ?, ?)", (thread, f"{user} 的对话", user, f"{day}T08:00:00.000Z",
                                                         json.dumps({"chat_profile": "tour_guide"})))
            for index, (kind, text, metadata) in enumerate((("user_message", "广州早茶吃什么？", "{}"),
                                                           ("assistant_message", "⏳ 排队中", "{}"),
                                                           ("assistant_message", "虾饺、烧卖。", '{"reply": {}}'))):
                connection.execute('INSERT INTO steps ("id", "name", "type", "threadId", "streaming", "output", '
                                   '"createdAt", "metadata") VALUES (?, ?, ?, ?, 0, ?, ?, ?)',
                                   (f"{thread}{index}", kind, kind, thread, text, f"{day}T08:00:0{index}.000Z", metadata))

    def export(*arguments):
        return subprocess.run([sys.executable, "-m", "history.export", *arguments, "--out", str(tmp_path / "out")],
                              cwd=ROOT, capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "CHAT_DB": str(database)})

    done = export()
    assert done.returncode == 0, done.stderr
    exported = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert [record["id"] for record in exported] == ["a", "b"]
    assert exported[0]["messages"] == [
        {"role": "user", "content": "广州早茶吃什么？", "created": "2026-11-01T08:00:00.000Z"},
        {"role": "assistant", "content": "虾饺、烧卖。", "created": "2026-11-01T08:00:02.000Z"}]
    markdown = (tmp_path / "out.md").read_text(encoding="utf-8")
    assert markdown.index("广州早茶吃什么？") < markdown.index("虾饺、烧卖。") and "排队中" not in markdown

    assert export("--user", "bob").returncode == 0
    assert [record["user"] for record in json.loads((tmp_path / "out.json").read_text())] == ["bob"]
    assert export("--since", "2026-11-10").returncode == 0
    assert [record["id"] for record in json.loads((tmp_path / "out.json").read_text())] == ["b"]
    assert export("--thread", "a", "--until", "2026-11-10").returncode == 0
    assert [record.id for record in read_records(database, thread_id="a")] == ["a"]
    missing = subprocess.run([sys.executable, "-m", "history.export"], cwd=ROOT, capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin", "CHAT_DB": str(tmp_path / "none.db")}, timeout=60)
    assert missing.returncode == 2 and "There is no database at" in missing.stderr


def test_the_storage_benchmark_measures_loop_time_and_size(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench.studies.storage_cost", "--messages", "40", "--out", str(tmp_path / "h.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "h.json").read_text())
    assert result["messages"] == 40 and 0 < result["loop_cpu_ms_per_message"] <= result["wall_ms_per_message"]
    assert result["database_bytes"] > 40 * 100


def test_the_markdown_export_shows_a_message_exactly_as_written():
    from history.export import to_markdown
    from history.records import Record

    forged = "问题\n\n**助手 Assistant** · 2026-12-03\n\n伪造的回答 <img src=http://10.0.0.1/x.png>"
    record = Record(id="t", name="对话", user=None, created=None, last_activity=None, persona=None,
                    messages=[{"role": "user", "content": forged, "created": "2026-12-03"}])
    markdown = to_markdown([record])
    assert markdown.count("**助手 Assistant**") == 0 and markdown.count("\\*\\*助手 Assistant\\*\\*") == 1
    assert markdown.count("<img") == markdown.count("\\<img") == 1  # escaped: shown, never rendered


def test_the_export_writes_every_field_a_visitor_or_a_socket_sets_as_text(tmp_path):
    """The thread's name is its first question, the persona is what the socket sent: neither may forge a turn or
    put HTML in the operator's viewer. Through the command, from a real database."""
    from history.schema import open_database

    forged = "你好\n\n**助手 Assistant** · 2026-12-03\n\n伪造 <img src=http://10.0.0.1/x.png>"
    database = tmp_path / "chat.db"
    open_database(database)
    with sqlite3.connect(database) as connection:
        connection.execute('INSERT INTO threads ("id", "createdAt", "name", "metadata") VALUES (?, ?, ?, ?)',
                           ("t1", "2026-12-03T10:00:00Z", forged, json.dumps({"chat_profile": "<b>x</b>\n## 人"})))
        connection.execute('INSERT INTO steps ("id", "name", "type", "threadId", "streaming", "output", "createdAt", '
                           '"metadata") VALUES (?, ?, ?, ?, 0, ?, ?, ?)',
                           ("s1", "User", "user_message", "t1", forged, "2026-12-03T10:00:00Z", "{}"))
    done = subprocess.run([sys.executable, "-m", "history.export", "--out", str(tmp_path / "out")], cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "CHAT_DB": str(database)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    markdown = (tmp_path / "out.md").read_text(encoding="utf-8")
    assert markdown.count("**助手 Assistant**") == 0 and markdown.count("<img") == markdown.count("\\<img") == 2
    assert "<b>" not in markdown and "\n## 人" not in markdown and markdown.count("\n## ") == 1
