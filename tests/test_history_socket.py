"""Stored conversations over Chainlit's socket and HTTP alone (no browser), against the real app and a real
SQLite file: another user cannot reach one, without logins they are kept for the operator only, and a
locked database never breaks a chat and is caught up when it frees.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import date, timedelta

import httpx
import pytest
import socketio

from harness.browser import wait_until
from harness.visitor import ChatClient, chat
from insights.days import Days
from tests.support import ARTIFACTS, RunningApp, login_cookie, rows, users_file


async def test_another_user_cannot_reach_alices_conversation(tiny_model_dir, tmp_path):
    users_file(tmp_path, ("alice", "bob"))
    app = RunningApp(tiny_model_dir, ARTIFACTS / "app-history-isolation.log", CHAT_STATE_DIR=str(tmp_path),
                     CHAT_USERS_FILE=str(tmp_path / "users.json"), CHAT_MAX_NEW_TOKENS="16")
    app.wait_until_ready()
    try:
        client = await chat(app.url, "爱丽丝的问题", {"Cookie": login_cookie(app.url, "alice")})
        await client.socket.disconnect()
        assert wait_until(lambda: rows(tmp_path / "chat.db", 'SELECT "name" FROM threads WHERE "userIdentifier" = ?', "alice"))
        alice_thread, alice_name = rows(tmp_path / "chat.db", 'SELECT "id", "name" FROM threads')[0]
        alice_id = rows(tmp_path / "chat.db", 'SELECT "id" FROM users WHERE "identifier" = ?', "alice")[0][0]
        bob_cookie = login_cookie(app.url, "bob")
        bob = httpx.Client(base_url=app.url, headers={"Cookie": bob_cookie}, timeout=30)
        listed = bob.post("/project/threads", json={"pagination": {"first": 20}, "filter": {"userId": alice_id}})
        assert listed.status_code == 200 and listed.json()["data"] == []  # bob's own list, whatever he asks
        assert bob.get(f"/project/thread/{alice_thread}").status_code in (401, 403, 404)
        renamed = bob.put("/project/thread", json={"threadId": alice_thread, "name": "bob was here"})
        assert renamed.status_code in (401, 403)
        assert bob.request("DELETE", "/project/thread", json={"threadId": alice_thread}).status_code in (401, 403)
        assert bob.post("/project/thread/share", json={"threadId": alice_thread, "isShared": True}).status_code >= 400
        assert bob.get(f"/project/share/{alice_thread}").status_code >= 400
        assert rows(tmp_path / "chat.db", 'SELECT "name" FROM threads WHERE "id" = ?', alice_thread) == [(alice_name,)]
        with pytest.raises(socketio.exceptions.ConnectionError):  # resuming alice's thread over the socket
            await ChatClient(app.url, {"Cookie": bob_cookie}, thread_id=alice_thread).connect()
    finally:
        app.stop()


async def test_without_logins_conversations_are_kept_for_the_operator_only(tiny_model_dir, tmp_path):
    with RunningApp(tiny_model_dir, ARTIFACTS / "app-history-open.log", CHAT_STATE_DIR=str(tmp_path),
                    CHAT_MAX_NEW_TOKENS="16") as app:
        client = await chat(app.url, "没有登录的访客")
        await client.socket.disconnect()
        assert wait_until(lambda: len(rows(tmp_path / "chat.db", 'SELECT * FROM steps WHERE "output" = ?', "没有登录的访客")) == 1)
        thread, owner = rows(tmp_path / "chat.db", 'SELECT "id", "userId" FROM threads')[0]
        assert owner is None
        listed = httpx.post(f"{app.url}/project/threads", json={"pagination": {"first": 20}, "filter": {}})
        assert listed.status_code in (401, 403)
        assert httpx.get(f"{app.url}/project/thread/{thread}").status_code in (401, 403)
        # What the operator counts of it (`python -m insights usage`): the reply's figures were stored with it.
        days = date.today() - timedelta(days=1), date.today() + timedelta(days=1)  # also if midnight falls meanwhile
        assert wait_until(lambda: Days(tmp_path / "chat.db").usage(*days).total.tokens_out > 0)
        figures = Days(tmp_path / "chat.db").usage(*days)
        assert (figures.total.questions, figures.total.chats, figures.total.users) == (1, 1, 0)
        assert 0 < figures.total.tokens_out <= 16 and figures.total.tokens_in > 5 and figures.total.stopped == 0
        assert 0 < figures.first_token_s["p50"] <= figures.reply_s["p50"]


async def test_a_locked_database_never_breaks_a_chat_and_is_saved_when_free(tiny_model_dir, tmp_path):
    app = RunningApp(tiny_model_dir, ARTIFACTS / "app-history-locked.log", CHAT_STATE_DIR=str(tmp_path),
                     CHAT_MAX_NEW_TOKENS="32")
    app.wait_until_ready()
    try:
        client = ChatClient(app.url)
        await client.connect()
        locker = sqlite3.connect(tmp_path / "chat.db", isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")  # a backup tool or a stuck writer holds the database
        await client.ask("数据库锁住时的问题")
        await asyncio.wait_for(client.done.wait(), 60)
        assert client.generated_tokens == 32 and client.text  # the reply streamed all the same
        deadline = time.monotonic() + 15
        while not any("对话暂时无法保存" in message.get("output", "") for message in client.messages):
            assert time.monotonic() < deadline, client.messages
            await asyncio.sleep(0.2)
        assert "could not be saved (database is locked)" in app.log()
        locker.execute("COMMIT")
        locker.close()
        assert wait_until(lambda: rows(tmp_path / "chat.db", 'SELECT "output" FROM steps WHERE "type" = ?', "user_message")
                          == [("数据库锁住时的问题",)], timeout=20)
        assert wait_until(lambda: len(rows(tmp_path / "chat.db", 'SELECT * FROM steps WHERE "metadata" LIKE ?', '%"reply"%')) == 1)
        assert wait_until(lambda: "waiting writes saved" in app.log())  # logged once the last waiting write is in
        await client.socket.disconnect()
    finally:
        app.stop()
