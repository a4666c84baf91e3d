"""Who reaches what, against the real app with logins on (tiny model): what is open without a login, the
socket's login and Origin checks, the lockout, sessions ended by the users command, and health and
metrics with their own access rule.

uvicorn (under `chainlit run`) trusts `X-Forwarded-For` from loopback, as from a reverse proxy on the same
machine, so a request that sets it is seen as coming from that address: that is how these tests play a
visitor from elsewhere on the LAN.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import socketio
from prometheus_client.parser import text_string_to_metric_families

from harness.browser import record_socket, wait_for_chat
from harness.visitor import ChatClient, chat
from tests.support import ARTIFACTS, RunningApp, users_file
from web.accounts import UsersFile
from web.auth import LOCKED_OUT

PASSWORDS = {name: f"{name}-password" for name in ("alice", "bob", "carol", "erin", "frank")}
METRICS_TOKEN = "monitoring-token-for-tests"
LOCKOUT_SECONDS = 4


@pytest.fixture(scope="module")
def secured(tiny_model_dir, tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    users = UsersFile(users_file(state, PASSWORDS))
    ARTIFACTS.mkdir(exist_ok=True)
    app = RunningApp(tiny_model_dir, ARTIFACTS / "app-logins.log", CHAT_STATE_DIR=str(state),
                     CHAT_USERS_FILE=str(state / "users.json"), CHAT_LOGIN_MAX_FAILURES="3",
                     CHAT_LOGIN_LOCKOUT_SECONDS=str(LOCKOUT_SECONDS), CHAT_METRICS_TOKEN=METRICS_TOKEN,
                     CHAT_MAX_NEW_TOKENS="32")
    app.users = users
    app.health_seen = []  # (status code, status) of /healthz while the app starts
    deadline = time.monotonic() + 180
    while not app.health_seen or app.health_seen[-1][0] != 200:
        assert app.process.poll() is None and time.monotonic() < deadline, app.log()[-3000:]
        try:
            answer = httpx.get(f"{app.url}/healthz", timeout=5)
            app.health_seen.append((answer.status_code, answer.json()["status"]))
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.5)
    yield app
    app.stop()


def log_in(app, name: str, password: str, address: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": address} if address else {}
    return httpx.post(f"{app.url}/login", data={"username": name, "password": password}, headers=headers, timeout=30)


def cookie_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return f"access_token={response.cookies['access_token']}"


def test_health_says_loading_then_ready(secured):
    assert (503, "loading") in secured.health_seen and secured.health_seen[-1] == (200, "ready")
    answer = httpx.get(f"{secured.url}/healthz")
    assert answer.headers["content-type"] == "application/json"  # the route, not Chainlit's catch-all page
    assert answer.json()["model"] == "tiny-qwen2"


OPEN = ["/", "/login", "/auth/config", "/project/translations?language=zh-CN", "/public/logo_light.svg",
        "/logo?theme=light", "/favicon", "/assets/" + "index.css", "/thread/some-thread-id"]
CLOSED = [("GET", "/user"), ("GET", "/project/settings?language=zh-CN"), ("POST", "/project/threads"),
          ("GET", "/project/thread/some-thread-id"), ("PUT", "/project/thread"), ("DELETE", "/project/thread"),
          ("POST", "/project/thread/share"), ("GET", "/project/share/some-thread-id"), ("POST", "/project/element"),
          ("GET", "/project/file/some-file"), ("POST", "/project/action"), ("POST", "/feedback"),
          ("POST", "/auth/jwt"), ("GET", "/ws/socket.io/?EIO=4&transport=polling")]


def test_without_a_login_only_what_the_login_page_needs_is_open(secured):
    for path in OPEN:
        assert httpx.get(secured.url + path).status_code != 401, path
    assert httpx.get(secured.url + "/").status_code == 200
    for method, path in CLOSED:
        answer = httpx.request(method, secured.url + path, json={})
        assert answer.status_code == 401, (method, path, answer.status_code)


async def test_the_socket_needs_a_login_and_the_apps_own_origin(secured):
    with pytest.raises(socketio.exceptions.ConnectionError):
        await ChatClient(secured.url).connect()
    cookie = cookie_of(log_in(secured, "alice", PASSWORDS["alice"]))
    with pytest.raises(socketio.exceptions.ConnectionError):
        await ChatClient(secured.url, {"Cookie": cookie, "Origin": "http://evil.example"}).connect()
    client = await chat(secured.url, "你好", {"Cookie": cookie, "Origin": secured.url})
    assert client.text and client.generated_tokens > 0
    await client.socket.disconnect()


def test_wrong_passwords_are_slowed_then_lock_that_name_out_from_that_address_until_the_lockout_ends(secured):
    attacker = "10.0.0.66"
    took = []
    for _ in range(3):
        started = time.monotonic()
        assert log_in(secured, "bob", "guess", attacker).status_code == 401
        took.append(time.monotonic() - started)
    assert took[1] >= 1 and took[2] >= 2  # each try after a failure waits longer
    locked = log_in(secured, "bob", PASSWORDS["bob"], attacker)  # the right password too, while locked out
    assert locked.status_code == 429 and locked.json() == {"detail": LOCKED_OUT}
    assert 0 < int(locked.headers["retry-after"]) <= LOCKOUT_SECONDS
    assert log_in(secured, "bob", PASSWORDS["bob"], "10.0.0.67").status_code == 200  # bob, from elsewhere
    started = time.monotonic()
    assert log_in(secured, "carol", PASSWORDS["carol"], attacker).status_code == 200  # another name from there:
    assert time.monotonic() - started >= 4  # slowed (three failures from that address), not locked

    refused = {sample.labels["reason"]: sample.value for sample in metric(secured, "chat_logins_refused")}
    assert refused["wrong_password"] >= 3 and refused["locked_out"] >= 1
    time.sleep(LOCKOUT_SECONDS)
    assert log_in(secured, "bob", PASSWORDS["bob"], attacker).status_code == 200


async def test_a_changed_password_or_a_removed_user_ends_their_sessions(secured):
    cookie = cookie_of(log_in(secured, "erin", PASSWORDS["erin"]))
    client = await chat(secured.url, "你好", {"Cookie": cookie})
    await asyncio.sleep(1.1)  # a password change counts from the next second
    secured.users.set_password("erin", "a-new-password")
    ended = httpx.get(f"{secured.url}/user", headers={"Cookie": cookie})
    assert ended.status_code == 401 and "access_token=;" in ended.headers["set-cookie"]  # the page asks again
    await client.ask("还在吗？")  # the socket opened before: its next message is refused with a message
    deadline = time.monotonic() + 10
    while not any("您的登录已失效" in message.get("output", "") for message in client.messages):
        assert time.monotonic() < deadline, client.messages
        await asyncio.sleep(0.2)
    await client.socket.disconnect()
    with pytest.raises(socketio.exceptions.ConnectionError):
        await ChatClient(secured.url, {"Cookie": cookie}).connect()

    cookie = cookie_of(log_in(secured, "frank", PASSWORDS["frank"]))
    assert httpx.get(f"{secured.url}/user", headers={"Cookie": cookie}).status_code == 200
    secured.users.remove("frank")
    assert httpx.get(f"{secured.url}/user", headers={"Cookie": cookie}).status_code == 401
    assert log_in(secured, "frank", PASSWORDS["frank"], "10.0.0.90").status_code == 401


def test_health_and_metrics_answer_elsewhere_only_with_the_token(secured):
    elsewhere = {"X-Forwarded-For": "10.1.2.3"}
    for path in ("/healthz", "/metrics"):
        assert httpx.get(secured.url + path).status_code == 200  # from this machine
        assert httpx.get(secured.url + path, headers=elsewhere).status_code == 403
        assert httpx.get(secured.url + path, headers={**elsewhere, "Authorization": "Bearer wrong"}).status_code == 403
        with_token = {**elsewhere, "Authorization": f"Bearer {METRICS_TOKEN}"}
        assert httpx.get(secured.url + path, headers=with_token).status_code == 200


def metric(app, name: str) -> list:
    text = httpx.get(f"{app.url}/metrics").text
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name in (name, name + "_total")]


def value(app, name: str, **labels: str) -> float:
    return sum(sample.value for sample in metric(app, name) if labels.items() <= sample.labels.items())


async def test_metrics_count_a_chat(secured):
    before = {name: value(secured, name) for name in ("chat_replies", "chat_generated_tokens", "chat_prompt_tokens",
                                                      "chat_time_to_first_token_seconds_count")}
    client = await chat(secured.url, "你好", {"Cookie": cookie_of(log_in(secured, "alice", PASSWORDS["alice"]))})
    await client.socket.disconnect()
    assert value(secured, "chat_replies") == before["chat_replies"] + 1
    assert value(secured, "chat_replies", ended="error") == 0
    assert value(secured, "chat_generated_tokens") == before["chat_generated_tokens"] + client.generated_tokens
    assert value(secured, "chat_prompt_tokens") > before["chat_prompt_tokens"]
    assert value(secured, "chat_time_to_first_token_seconds_count") == \
        before["chat_time_to_first_token_seconds_count"] + 1
    assert value(secured, "chat_engine_ready") == 1 and value(secured, "chat_replies_running") == 0
    assert value(secured, "chat_replies_waiting") == 0 and value(secured, "chat_engine_restarts") == 0
    assert value(secured, "chat_app_memory_pss_bytes") > 1e9
    assert 0 <= value(secured, "chat_kv_cache_usage_ratio") <= 1
    # Speculation's tokens, proposed and kept (none with it off, the default).
    proposed, kept = value(secured, "chat_speculative_proposed_tokens"), value(secured, "chat_speculative_accepted_tokens")
    assert 0 <= kept <= proposed and 0 <= value(secured, "chat_speculative_acceptance_ratio") <= 1


def test_the_login_page_says_when_logins_are_locked_and_lets_in_after(secured, browser):
    """Last in this module: Playwright's sync API keeps an event loop running, which asyncio tests must not find."""
    context = browser.new_context(locale="zh-CN", extra_http_headers={"X-Forwarded-For": "10.0.0.70"})
    page = context.new_page()
    record_socket(page)
    page.goto(secured.url)
    page.fill("#email", "carol")
    for attempt in range(3):
        page.fill("#password", f"guess {attempt}")
        page.click("button[type=submit]")
        page.wait_for_selector("text=用户名或密码错误。 Wrong user name or password.", timeout=30_000)
    page.fill("#password", PASSWORDS["carol"])
    page.click("button[type=submit]")
    page.wait_for_selector(f"text={LOCKED_OUT}", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "login-locked.png"))
    time.sleep(LOCKOUT_SECONDS)
    page.click("button[type=submit]")
    wait_for_chat(page)  # a question sent before the chat has started is lost
    page.fill("#chat-input", "你好")
    page.click("#chat-submit")
    page.wait_for_selector('[data-step-type="assistant_message"] .message-content', timeout=60_000)
    context.close()
