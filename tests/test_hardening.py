"""A hostile visitor against the real app (`chainlit run app.py` on the scripted engine), second round: bodies refused
at the door, other people's messages out of reach, a reply that cannot be edited, buttons that cannot skip the line,
and a persona that does not fit the context stopping the app at start. While the attacks run, an honest chat keeps
streaming. Integration tier: gigabytes on loopback and four app starts take longer than the fast tier's minute."""

from __future__ import annotations

import asyncio
import select
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime

import httpx
import psutil
import pytest

from harness.app_process import free_port
from harness.visitor import ChatClient, until, visit
from tests.fake_engine import ALTERNATIVE
from tests.support import ARTIFACTS, ROOT, FakeApp, docx_bomb, login_headers, rows, token_views, users_file

GIB = 1024 ** 3


@pytest.fixture(scope="module")
def open_site(tmp_path_factory):
    """No logins, as a presenter runs it on a LAN; two places in the line."""
    ARTIFACTS.mkdir(exist_ok=True)
    running = FakeApp(ARTIFACTS / "app-hardening.log", CHAT_STATE_DIR=str(tmp_path_factory.mktemp("open-state")),
                      CHAT_MAX_CONCURRENT_REPLIES="2", CHAT_MAX_NEW_TOKENS="100", CHAT_MAX_MODEL_LEN="2048")
    running.wait_until_ready(timeout=60)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def login_site(tmp_path_factory):
    state = tmp_path_factory.mktemp("login-state")
    users_file(state, ("alice", "bob"))
    running = FakeApp(ARTIFACTS / "app-hardening-logins.log", CHAT_STATE_DIR=str(state),
                      CHAT_USERS_FILE=str(state / "users.json"), CHAT_MAX_NEW_TOKENS="100", CHAT_MAX_MODEL_LEN="2048")
    running.wait_until_ready(timeout=60)
    running.database = state / "chat.db"
    yield running
    running.stop()


def app_rss(app) -> int:
    return psutil.Process(app.process.pid).memory_info().rss


def send_body(url: str, path: str, headers: dict[str, str], total: int, declare: bool,
              method: str = "POST") -> tuple[int, int]:
    """Send up to `total` bytes to `path` as a client that keeps sending until the server answers: (status, bytes
    sent). `declare`: with a Content-Length, else chunked."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/octet-stream",
                *(f"{key}: {value}" for key, value in headers.items()),
                f"Content-Length: {total}" if declare else "Transfer-Encoding: chunked"]
        connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        chunk, sent, answer = b"\0" * (1 << 20), 0, b""
        piece = chunk if declare else b"%x\r\n%s\r\n" % (len(chunk), chunk)
        connection.settimeout(5)
        while sent < total:
            readable, writable, _ = select.select([connection], [connection], [], 5)
            if readable or not writable:
                break  # the server answered (or stopped reading)
            try:
                connection.sendall(piece)  # whole chunks: a chunked body stays well-formed
            except OSError:
                break
            sent += len(chunk)
        connection.settimeout(30)
        while b"\r\n" not in answer:
            more = connection.recv(65536)
            if not more:
                break
            answer += more
    return int(answer.split(b" ")[1]), sent


async def streaming_meanwhile(url: str, headers: dict[str, str] | None, attack) -> tuple[ChatClient, object]:
    """Run `attack()` (blocking, on a thread) while an honest visitor's reply streams; the visitor and its outcome."""
    visitor = await visit(url, headers)
    await visitor.ask("讲一个长一点的故事")
    await until(lambda: visitor.text, timeout=10)
    outcome = await asyncio.to_thread(attack)
    await asyncio.wait_for(visitor.done.wait(), 30)
    return visitor, outcome


@pytest.mark.parametrize("logins", [False, True])
async def test_a_gigabyte_to_any_route_is_refused_before_its_body_is_read(open_site, login_site, logins):
    site = login_site if logins else open_site
    headers = login_headers(site.url, "alice") if logins else {}
    before = app_rss(site)

    def attack() -> list[tuple[int, int]]:
        return [send_body(site.url, "/project/file?session_id=x", headers, GIB, declare=True),
                send_body(site.url, "/project/file?session_id=x", headers, GIB, declare=False),
                send_body(site.url, "/project/threads", headers, GIB, declare=True),
                send_body(site.url, "/project/element", headers, GIB, declare=False, method="PUT"),
                send_body(site.url, "/ws/socket.io/?EIO=4&transport=polling", headers, GIB, declare=False)]

    visitor, answers = await streaming_meanwhile(site.url, headers, attack)
    growth = app_rss(site) - before
    print(f"1 GiB bodies ({'with' if logins else 'without'} logins): {answers}; the app grew by {growth / 2**20:.1f} MiB")
    uploads, others = answers[:2], answers[2:]
    assert all(status == 403 for status, _ in uploads), answers
    assert [status for status, _ in others] == [413, 413, 400], answers  # the socket's refuses a body without a sid
    assert all(sent < 64 * 2 ** 20 for _, sent in answers), answers  # the sender was stopped early
    assert growth < 50 * 2 ** 20
    assert visitor.generated_tokens > 50  # the honest reply streamed to its end meanwhile
    assert httpx.post(f"{site.url}/project/file?session_id=x", files={"file": ("a.txt", b"x")},
                      headers=headers).json()["detail"].endswith("File uploads are off on this server.")


async def test_another_users_messages_cannot_be_deleted_edited_or_branched_from(login_site):
    alice = await visit(login_site.url, login_headers(login_site.url, "alice"))
    await alice.socket.emit("chat_settings_change", {"teaching": True})
    await alice.ask_and_wait("爱丽丝的问题")
    reply_text, stored = alice.replies()[-1], 'SELECT "id", "threadId" FROM steps WHERE "output" = ?'
    await until(lambda: rows(login_site.database, stored, "爱丽丝的问题"))
    [(question, thread)] = rows(login_site.database, stored, "爱丽丝的问题")
    in_thread = 'SELECT "id" FROM steps WHERE "threadId" = ? AND "output" = ?'
    await until(lambda: rows(login_site.database, in_thread, thread, reply_text))  # its last write landed
    [(reply,)] = rows(login_site.database, in_thread, thread, reply_text)
    view = token_views(alice)[-1]

    bob = await visit(login_site.url, login_headers(login_site.url, "bob"))
    await bob.ask_and_wait("鲍勃的问题")
    message = {"id": question, "threadId": "", "name": "User", "type": "user_message", "output": "龘",
               "createdAt": datetime.now(UTC).isoformat(), "command": "tokenize"}
    await bob.socket.emit("client_message", {"message": message, "fileReferences": None})  # Tokenize forgets its text
    ends = sum(event == "task_end" for event, _ in bob.events)
    await until(lambda: bob.said("分词 Tokenize") and sum(event == "task_end" for event, _ in bob.events) > ends)
    await bob.socket.emit("edit_message", {"message": {**message, "id": reply, "output": "伪造的回答"}})
    await until(lambda: bob.errors() and "Only your own questions can be edited." in bob.errors()[-1])
    answer = await bob.press("force_token", {"element": view["id"], "index": 1, "token": ALTERNATIVE})
    assert answer.status_code == 200
    await until(lambda: "That choice is no longer available" in bob.errors()[-1])  # not a view of his
    async with httpx.AsyncClient(headers=login_headers(login_site.url, "bob"), timeout=30) as client:
        crafted = await client.post(f"{login_site.url}/project/action", json={
            "sessionId": alice.session_id, "action": {"name": "force_token",
                                                      "payload": {"element": view["id"], "index": 1, "token": 7}}})
    assert crafted.status_code == 401
    await asyncio.sleep(1)
    assert rows(login_site.database, 'SELECT "threadId", "output" FROM steps WHERE "id" = ?', question) == [(thread, "爱丽丝的问题")]
    assert rows(login_site.database, 'SELECT "output" FROM steps WHERE "id" = ?', reply) == [(reply_text,)]

    # Alice herself: her own reply cannot be edited, nor overwritten by a question under its id.
    errors = len(alice.errors())
    await alice.socket.emit("edit_message", {"message": {**message, "id": reply, "output": "伪造的回答",
                                                         "command": None}})
    await until(lambda: len(alice.errors()) == errors + 1)
    assert "Only your own questions can be edited." in alice.errors()[-1]
    await alice.socket.emit("client_message", {"message": {**message, "id": reply, "command": None}, "fileReferences": None})
    await asyncio.sleep(1)
    assert rows(login_site.database, 'SELECT "type", "output" FROM steps WHERE "id" = ?', reply) == [("assistant_message",
                                                                                            reply_text)]
    assert "Refused a 'client_message' event" in login_site.log()
    for client in (alice, bob):
        await client.socket.disconnect()


def running_replies(app) -> float:
    metrics = httpx.get(f"{app.url}/metrics", timeout=10).text
    return float(next(line.split()[-1] for line in metrics.splitlines() if line.startswith("chat_replies_running ")))


async def test_buttons_pressed_thirty_times_at_once_hold_one_place_and_end_with_the_chat(open_site):
    attacker = await visit(open_site.url)
    await attacker.socket.emit("chat_settings_change", {"teaching": True})
    await attacker.ask_and_wait("第一个问题")
    view = token_views(attacker)[-1]
    prompt_view = next(element for element in attacker.elements()
                       if element["name"] == "TokenView" and element["props"].get("action") == "weigh_prompt")
    honest = await visit(open_site.url)
    await honest.ask("讲一个长一点的故事")
    presses = [attacker.press("force_token", {"element": view["id"], "index": 1, "token": ALTERNATIVE})
               for _ in range(30)]
    presses += [attacker.press("weigh_prompt", {"element": prompt_view["id"]}) for _ in range(30)]
    presses += [attacker.press("weigh_prompt", {"element": [prompt_view["id"]]})]  # a list where a string belongs
    pressing = asyncio.gather(*presses)
    await until(lambda: running_replies(open_site) == 2, timeout=10)  # the honest reply and one of the attacker's
    peak = 0.0
    for _ in range(10):
        peak = max(peak, running_replies(open_site))
        await asyncio.sleep(0.05)
    assert peak <= 2
    await attacker.socket.disconnect()  # the tab closed: every generation of that chat ends
    closed = time.monotonic()
    answers = await asyncio.wait_for(pressing, 30)
    await until(lambda: running_replies(open_site) <= 1, timeout=5)
    print(f"Closed the chat: its generations ended in {time.monotonic() - closed:.2f} s")
    assert {answer.status_code for answer in answers} <= {200, 500}
    assert sum(answer.status_code == 500 for answer in answers) <= 1  # the one cancelled when the tab closed
    busy = [error for error in attacker.errors() if "A reply is still being written in this chat" in error]
    assert len(busy) >= 58, attacker.errors()[-3:]
    await asyncio.wait_for(honest.done.wait(), 30)
    assert honest.generated_tokens > 50
    await until(lambda: running_replies(open_site) == 0, timeout=5)
    await honest.socket.disconnect()


def test_a_persona_that_does_not_fit_the_context_stops_the_app_at_start_with_one_line(tmp_path):
    """The tour guide's instructions take 338 of the scripted engine's tokens (one a character): with replies of up to
    800 tokens, a 1,024-token context has no room for a question."""
    started = subprocess.Popen([sys.executable, "-m", "tests.fake_app", "run", "app.py", "--headless", "--port",
                                str(free_port())], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={"PATH": "/usr/bin:/bin", "CHAT_STATE_DIR": str(tmp_path),
                                    "CHAT_MAX_MODEL_LEN": "1024", "CHAT_MAX_NEW_TOKENS": "800"})
    try:
        output, _ = started.communicate(timeout=60)
    finally:
        started.kill()
    assert started.returncode != 0
    [line] = [line for line in output.splitlines() if "CHAT_MAX_MODEL_LEN" in line]
    assert "'tour_guide'" in line and "Set CHAT_MAX_MODEL_LEN to at least" in line, output[-2000:]
    assert "Traceback" not in output


async def test_a_persona_that_fits_a_1024_token_context_answers_hello(tmp_path):
    running = FakeApp(ARTIFACTS / "app-small-context.log", CHAT_STATE_DIR=str(tmp_path), CHAT_MAX_MODEL_LEN="1024")
    try:
        running.wait_until_ready(timeout=60)
        visitor = await visit(running.url)
        assert (await visitor.ask_and_wait("hello")).startswith("[1 messages]")
        await visitor.socket.disconnect()
    finally:
        running.stop()


async def test_documents_that_bite_dropped_into_a_running_apps_folder_cost_one_log_line_each(tmp_path):
    from tests.fake_engine import QUOTE

    documents, outside = tmp_path / "documents", tmp_path / "outside.md"
    documents.mkdir()
    outside.write_text("# 机密\n\n服务器密码是 hunter2。")
    (documents / "老建筑导览.md").write_text("# 老建筑导览\n\n沙面的老建筑 ![沙面](http://192.168.1.1/x.png)，见 [地图](http://10.0.0.1/m)。")
    running = FakeApp(ARTIFACTS / "app-documents.log", CHAT_STATE_DIR=str(tmp_path / "state"),
                      CHAT_KNOWLEDGE_DIR=str(documents), CHAT_MAX_NEW_TOKENS="300", CHAT_MAX_MODEL_LEN="4096")
    try:
        running.wait_until_ready(timeout=60)

        def drop_them() -> None:
            # made beside the folder and moved in whole: compressing 300 MiB writes nothing for over a second on a
            # slow CPU, and a file that stops growing that long is read as it stands (then again once it changes)
            docx_bomb(tmp_path / "炸弹.docx").rename(documents / "炸弹.docx")
            with open(documents / "大.pdf", "wb") as file:
                file.truncate(200 * 2 ** 20)
            (documents / "坏.pdf").write_bytes(b"%PDF-1.7 not really")
            (documents / "链接.md").symlink_to(outside)
            deadline = time.monotonic() + 30
            while running.log().count("Knowledge: skipped") < 4:
                assert time.monotonic() < deadline, running.log()[-3000:]
                time.sleep(0.2)

        visitor, _ = await streaming_meanwhile(running.url, None, drop_them)
        assert visitor.generated_tokens > 250  # the reply streamed to its end while the files were read
        await asyncio.sleep(12)  # a rescan later: nothing is read or logged again, the app runs on
        log = running.log()
        assert log.count("Knowledge: skipped") == 4 and running.process.poll() is None
        for name, why in (("炸弹.docx", "its parts inflate to 300 MiB"), ("大.pdf", "it is 200 MiB, more than the 64"),
                          ("坏.pdf", "PdfStreamError"), ("链接.md", f"it is a link to {outside}, outside the folder")):
            assert f"{name}: {why}" in log, name
        asker = await visit(running.url)
        await asker.ask_and_wait(f"沙面的老建筑导览？{QUOTE}")
        said = asker.replies()[-1]  # the prompt as the engine got it, passages included
        assert "沙面的老建筑 沙面，见 地图 (http://10.0.0.1/m)" in said and "192.168.1.1" not in said  # an image is its words
        assert "![" not in said and "](" not in said
        assert "hunter2" not in said
        await asker.socket.disconnect()
    finally:
        running.stop()
