"""What a hostile client can send, checked without a server: thread ids, the data layer's queries, socket
payloads, chat settings, the login throttle under concurrency, and the cost of rendering a long chat.

The validators are driven with `hypothesis`: whatever a client makes up is refused with a reason or
taken as a well-formed value, never an uncaught error."""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from chainlit.types import Pagination, ThreadFilter
from hypothesis import given, settings
from hypothesis import strategies as st

from chat.chat_options import checked, initial_options
from config.settings import load_settings
from engine.prompt import render_prompt
from history.ids import is_uuid
from history.schema import open_database
from tests.support import new_store, step
from web.auth import FairChecks, LoginThrottle, login_keys
from web.socket_guard import EventRefused, _check_auth, _question

pytestmark = pytest.mark.fast
SETTINGS = load_settings({})
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=10)
INJECTION = "x') UNION SELECT s.\"id\" FROM steps s /*"


@given(st.text(max_size=60) | st.uuids().map(str).map(str.upper) | st.uuids().map(lambda u: "{" + str(u) + "}"))
def test_only_a_uuid_as_python_writes_it_is_a_thread_id(text):
    assert is_uuid(text) == (text == str(uuid.UUID(text)) if _parses(text) else False)
    assert is_uuid(str(uuid.uuid4()))


def _parses(text: str) -> bool:
    try:
        uuid.UUID(text)
        return True
    except ValueError:
        return False


@given(st.dictionaries(st.sampled_from(["sessionId", "clientType", "threadId", "chatProfile", "userEnv", "x"]), JSON)
       | JSON)
def test_a_connection_is_refused_with_a_reason_or_taken_with_a_uuid(auth):
    try:
        thread_id = _check_auth(auth)
    except EventRefused as reason:
        assert str(reason)
    else:
        assert thread_id is None or is_uuid(thread_id)


def test_a_crafted_thread_id_is_refused_at_connect():
    auth = {"sessionId": "s", "clientType": "webapp", "threadId": INJECTION}
    with pytest.raises(EventRefused, match="not a UUID"):
        _check_auth(auth)
    assert _check_auth({**auth, "threadId": ""}) is None  # the page's new chat


@given(JSON)
def test_a_question_is_sent_with_an_offered_command_or_none(command):
    message = {"id": "2f1f4c3e-6d2a-4b8e-9c1d-3a5b7e9f0a12", "output": "广州塔", "command": command}
    if command is None:
        return  # a plain question: taken further on, where the session is known
    with pytest.raises(EventRefused, match="no command"):
        _question(100, frozenset({"tokenize"}), "a-sid", {"message": message})


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(["temperature", "top_p", "max_new_tokens", "live_stats", "teaching",
                                        "thinking"]), JSON | st.integers(min_value=10**300, max_value=10**400)))
def test_any_settings_a_client_sends_are_taken_in_range_or_refused_with_a_message(proposed):
    previous = initial_options(SETTINGS)
    options, refused = checked(SETTINGS, previous, proposed)
    assert 0 <= options.temperature <= 2 and 0.05 <= options.top_p <= 1
    assert all(isinstance(getattr(options, key), bool) for key in ("live_stats", "teaching", "thinking"))
    assert all(len(message) < 400 for message in refused)
    assert len(refused) >= len([key for key, value in proposed.items() if getattr(options, key) != value])


def test_a_number_too_large_for_a_float_and_the_text_false_are_refused():
    previous = initial_options(SETTINGS)
    options, refused = checked(SETTINGS, previous, {"temperature": 10**400, "teaching": "false"})
    assert options == previous and len(refused) == 2
    assert "is outside 0–2; 0.7 is kept" in refused[0] and "'false' is not on or off; it stays off" in refused[1]


def test_guesses_sent_at_once_get_no_more_checks_than_guesses_sent_one_by_one():
    throttle = LoginThrottle(max_failures=3, lockout=60)
    keys = ["user:alice", "address:10.0.0.9"]
    reserved = [throttle.begin(keys) for _ in range(40)]
    assert reserved.count(True) == 3  # 40 arrive together: three are checked
    for _ in range(3):
        throttle.end(keys, False)
    assert throttle.locked_for(keys) > 0 and not throttle.begin(keys)
    other = ["user:bob", "address:10.0.0.10"]
    assert throttle.begin(other)  # someone else is not held up
    throttle.end(other, True)


def test_past_many_checks_at_once_only_addresses_that_already_have_one_wait():
    throttle = LoginThrottle(max_failures=3, lockout=60)
    first = [throttle.begin([f"user:a{index}", f"address:10.0.0.{index}"]) for index in range(40)]
    second = [throttle.begin([f"user:b{index}", f"address:10.0.0.{index}"]) for index in range(40)]
    assert all(first) and not any(second)  # 40 under way, past MAX_CHECKING: one at a time per address
    assert throttle.begin(["user:alice", "address:10.9.9.9"])  # a user's first attempt is never shut out


async def test_password_checks_are_taken_fairly_not_as_they_arrive():
    throttle = LoginThrottle(max_failures=6, lockout=60)
    suspects = [f"127.0.0.{number}" for number in range(2, 10)]
    for address in suspects:
        throttle.failed(login_keys("guess", address))
    order: list[str] = []
    with ThreadPoolExecutor(max_workers=1) as executor:
        checks = FairChecks(executor, lambda address: throttle.has_failed(login_keys("", address)[1]))

        def check(who: str) -> bool:
            time.sleep(0.01)
            order.append(who)
            return who == "alice"

        guesses = [checks.run(address, functools.partial(check, f"{address}#{round}"))
                   for round in range(6) for address in suspects]
        tasks = [asyncio.create_task(guess) for guess in guesses]
        await asyncio.sleep(0)
        assert await checks.run("127.0.0.20", functools.partial(check, "alice"))
        await asyncio.gather(*tasks)
    assert order.index("alice") == 1  # after the check under way: before every guess
    firsts = [order.index(f"{address}#0") for address in suspects]
    assert max(firsts) < min(order.index(f"{address}#1") for address in suspects)  # each address's first, then seconds


def test_an_ipv6_client_is_counted_by_its_64_network():
    assert login_keys("a", "2001:db8:1:2::5")[1] == login_keys("a", "2001:db8:1:2:ffff::9")[1]
    assert login_keys("a", "10.0.0.1")[1] != login_keys("a", "10.0.0.2")[1]


class CountingTokenizer:
    """ChatML by hand, one token per character: counts how often a prompt is rendered."""

    def __init__(self) -> None:
        self.renderings = 0

    def apply_chat_template(self, conversation, **options):
        self.renderings += 1
        return "".join(f"<{message['role']}>{message['content']}" for message in conversation) + "<assistant>"

    def encode(self, text, add_special_tokens=False):
        return list(range(len(text)))


@given(st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=60), st.integers(min_value=30,
                                                                                             max_value=3000))
def test_the_prompt_keeps_the_most_turns_that_fit_in_few_renderings(lengths, budget):
    history = [{"role": "user" if index % 2 == 0 else "assistant", "content": "字" * length}
               for index, length in enumerate(lengths + ([1] if len(lengths) % 2 == 0 else []))]
    tokenizer = CountingTokenizer()
    try:
        prompt = render_prompt(tokenizer, "导游", history, budget)
    except Exception as error:  # the newest question alone does not fit
        assert type(error).__name__ == "MessageTooLongError"
        return
    assert len(prompt.token_ids) <= budget and prompt.dropped_messages % 2 == 0
    if prompt.dropped_messages:  # one turn more would not fit
        longer = render_prompt(CountingTokenizer(), "导游", history[prompt.dropped_messages - 2:], 10**9)
        assert len(longer.token_ids) > budget
    assert tokenizer.renderings <= 2 + len(history).bit_length()


async def test_crafted_thread_ids_reach_no_query_and_another_users_steps_stay_out(tmp_path):
    database = tmp_path / "chat.db"
    open_database(database)
    store = new_store(database)
    alice, bob = str(uuid.uuid4()), str(uuid.uuid4())
    for thread, user in ((alice, "alice-id"), (bob, "bob-id")):
        await store.update_thread(thread, name=thread, user_id=None)
        with sqlite3.connect(database) as connection:
            connection.execute('UPDATE threads SET "userId" = ?, "userIdentifier" = ? WHERE "id" = ?',
                               (user, user.removesuffix("-id"), thread))
    await store.create_step(step(bob, "user_message", "bob's secret", "2026-12-01T10:00:00.000Z"))
    await store.update_thread(INJECTION, user_id="alice-id")
    assert not await store.get_thread(INJECTION)
    # A crafted id that an older version stored: its text reaches no query.
    with sqlite3.connect(database) as connection:
        connection.execute('INSERT INTO threads ("id", "userId", "userIdentifier") VALUES (?, ?, ?)',
                           (INJECTION, "alice-id", "alice"))
    threads = await store.get_all_user_threads(user_id="alice-id")
    assert {thread["id"] for thread in threads} == {alice, INJECTION}
    assert "bob's secret" not in json.dumps(threads, ensure_ascii=False)
    listed = await store.list_threads(Pagination(first=20), ThreadFilter(userId="alice-id", search="secret"))
    assert listed.data == []
    await store.close()


async def test_a_step_keeps_its_thread_and_a_thread_its_owner(tmp_path):
    database = tmp_path / "chat.db"
    open_database(database)
    store = new_store(database)
    alice, mallory = str(uuid.uuid4()), str(uuid.uuid4())
    await store.update_thread(alice, user_id=None, name="alice")
    with sqlite3.connect(database) as connection:
        connection.execute('UPDATE threads SET "userId" = ? WHERE "id" = ?', ("alice-id", alice))
    question = step(alice, "user_message", "爱丽丝的问题", "2026-12-01T10:00:00.000Z")
    await store.create_step(question)
    await store.create_step({**question, "threadId": mallory, "output": "overwritten"})  # same id, other thread
    await store.update_thread(alice, user_id="mallory-id")
    with sqlite3.connect(database) as connection:
        assert connection.execute('SELECT "threadId", "output" FROM steps').fetchall() == [(alice, "爱丽丝的问题")]
        assert connection.execute('SELECT "userId" FROM threads WHERE "id" = ?', (alice,)).fetchone() == ("alice-id",)
    await store.close()


async def test_the_history_list_pages_without_steps_and_searches_in_sql(tmp_path):
    database = tmp_path / "chat.db"
    open_database(database)
    store = new_store(database)
    threads = [str(uuid.uuid4()) for _ in range(5)]
    for index, thread in enumerate(threads):
        await store.update_thread(thread, name=f"chat {index}", user_id=None)
        with sqlite3.connect(database) as connection:
            connection.execute('UPDATE threads SET "userId" = ? WHERE "id" = ?', ("alice-id", thread))
        await store.create_step(step(thread, "user_message", f"问题 {index} 100%_done", f"2026-12-01T10:00:0{index}.000Z"))
    first = await store.list_threads(Pagination(first=2), ThreadFilter(userId="alice-id"))
    assert [thread["name"] for thread in first.data] == ["chat 4", "chat 3"] and first.pageInfo.hasNextPage
    assert all(thread["steps"] == [] for thread in first.data)
    rest = await store.list_threads(Pagination(first=10, cursor=first.pageInfo.endCursor), ThreadFilter(userId="alice-id"))
    assert [thread["name"] for thread in rest.data] == ["chat 2", "chat 1", "chat 0"] and not rest.pageInfo.hasNextPage
    found = await store.list_threads(Pagination(first=10), ThreadFilter(userId="alice-id", search="问题 3 100%_"))
    assert [thread["name"] for thread in found.data] == ["chat 3"]
    assert (await store.list_threads(Pagination(first=10), ThreadFilter(userId="alice-id", search="%"))).data != []
    assert (await store.list_threads(Pagination(first=10), ThreadFilter(userId="alice-id", search="done%"))).data == []
    await store.close()


async def test_a_write_that_can_never_succeed_is_dropped_and_later_writes_go_on(tmp_path, caplog):
    database = tmp_path / "chat.db"
    open_database(database)
    store = new_store(database)
    await store.execute_sql('INSERT INTO threads ("id", "missing_column") VALUES (:id, 1)', {"id": "x"})
    thread = str(uuid.uuid4())
    await store.update_thread(thread, name="after")
    assert store.pending() == 0 and "failed and was dropped" in caplog.text
    with sqlite3.connect(database) as connection:
        assert connection.execute('SELECT "name" FROM threads').fetchall() == [("after",)]
    await store.close()


@given(st.lists(st.binary(max_size=3000), max_size=8), st.sampled_from(["", "declared", "lying", "text"]))
async def test_a_login_body_is_read_whole_up_to_the_cap_and_refused_beyond(chunks, declared):
    from web.gate import MAX_LOGIN_BYTES, _read_body

    body = b"".join(chunks)
    messages = [{"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
                for index, chunk in enumerate(chunks)] or [{"type": "http.request", "body": b"", "more_body": False}]
    sent = iter(messages)

    async def receive():
        return next(sent)

    length = {"": "", "declared": str(len(body)), "lying": "10", "text": "ten"}[declared]
    read = await _read_body(receive, length)
    if len(body) > MAX_LOGIN_BYTES:
        assert read is None
    else:
        assert read == body


def test_a_model_servers_credentials_never_show():
    import http.server
    import threading

    from engine.remote_engine import check_replica, shown_address

    assert shown_address("http://user:secret@10.0.0.5:8000/v1?key=secret") == "http://10.0.0.5:8000/v1"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # 501 to all
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        state = check_replica(f"http://user:secret@127.0.0.1:{server.server_port}/v1", {}, SETTINGS, None)
    finally:
        server.shutdown()
    assert not state.ready and "501" in state.problem and "secret" not in state.problem
    assert f"http://127.0.0.1:{server.server_port}/v1/models" in state.problem
