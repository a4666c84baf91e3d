"""What a neighbour on the LAN can try against the real app (`chainlit run app.py` on the scripted engine, listening
on every network, no logins, an operator's token, one widget site allowed), third round: a stranger's host name
(DNS rebinding), another site's page at the operator's door, wrong operator tokens, a short token, forwarded
addresses from anyone, another browser taking back a rating, the widget's font, and (in Chromium) a document and a
reply whose Markdown would make visitors' browsers fetch an address of the author's choosing (in
`test_lan_neighbours_browser.py`)."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys

import httpx
import psutil
import pytest
import socketio

from harness.app_process import free_port
from harness.visitor import visit
from tests.support import ARTIFACTS, ROOT, FakeApp

pytestmark = pytest.mark.fast
TOKEN = "operator-token-of-thirty-two-characters"
WIDGET_SITE = "http://museum.example"
STRANGER = "rebind.attacker.example"
DOCUMENT = ("# 沙面地图\n\n沙面的码头在沙面南边。![地图 [新]](http://192.0.2.7/x.png) "
            "![a\\]b](http://192.0.2.8/y.png)\n")  # the two images: nested and escaped brackets


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    yield from lan_site(tmp_path_factory, max_new_tokens=40)  # a second of the fake's words: enough for any reply here


def lan_site(tmp_path_factory, max_new_tokens: int):
    """The app on every network, with the document, the token and the widget site (for this module and the
    browser's); replies of `max_new_tokens`."""
    documents = tmp_path_factory.mktemp("documents")
    (documents / "沙面地图.md").write_text(DOCUMENT, encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    running = FakeApp(ARTIFACTS / "app-lan.log", host="0.0.0.0", CHAT_OPERATOR_TOKEN=TOKEN,
                      CHAT_ALLOWED_ORIGINS=WIDGET_SITE, CHAT_KNOWLEDGE_DIR=str(documents),
                      CHAT_MAX_NEW_TOKENS=str(max_new_tokens), CHAT_MAX_MODEL_LEN="4096")
    running.wait_until_ready(timeout=60)
    yield running
    running.stop()


def lan_address() -> str | None:
    """One of this machine's own addresses other than loopback, if it has one."""
    found = [entry.address for entries in psutil.net_if_addrs().values() for entry in entries
             if entry.family == socket.AF_INET and not ipaddress.ip_address(entry.address).is_loopback]
    return found[0] if found else None


def get(site, path: str, local: str = "127.0.0.1", **options) -> httpx.Response:
    with httpx.Client(base_url=site.url, timeout=30, transport=httpx.HTTPTransport(local_address=local)) as client:
        return client.get(path, **options)


async def test_a_strangers_name_gets_no_page_no_health_and_no_socket(site):
    for path in ("/", "/healthz", "/metrics", "/operator", "/public/theme.json"):
        refused = get(site, path, headers={"Host": STRANGER})
        assert refused.status_code == 400 and "CHAT_ALLOWED_HOSTS" in refused.json()["detail"], path
    stranger = socketio.AsyncClient()
    with pytest.raises(socketio.exceptions.ConnectionError):
        await stranger.connect(site.url, socketio_path="/ws/socket.io", headers={"Host": STRANGER},
                               auth={"sessionId": "x", "clientType": "webapp"}, transports=["websocket"], wait_timeout=10)
    for name in (f"localhost:{site.port}", f"127.0.0.1:{site.port}"):
        assert get(site, "/", headers={"Host": name}).status_code == 200
    if address := lan_address():  # opened by its LAN address, as visitors' phones do
        by_address = f"http://{address}:{site.port}"
        assert httpx.get(f"{by_address}/", timeout=30).status_code == 200
        visitor = await visit(by_address)
        assert (await visitor.ask_and_wait("你好")).startswith("[1 messages]")
        await visitor.socket.disconnect()
    assert f"Refused requests for the name '{STRANGER}'" in site.log()


def test_forwarded_addresses_are_believed_from_this_machine_only(site):
    get(site, "/", local="127.0.0.2", headers={"Host": "first.stranger", "X-Forwarded-For": "203.0.113.9"})
    get(site, "/", headers={"Host": "second.stranger", "X-Forwarded-For": "203.0.113.10"})  # from 127.0.0.1, a proxy
    log = site.log()
    assert "'first.stranger' (from 127.0.0.2)" in log and "'second.stranger' (from 203.0.113.10)" in log


def test_every_page_says_the_browser_loads_images_fonts_and_connections_from_the_app_only(site):
    for path in ("/", "/login", "/join", f"/operator?token={TOKEN}", "/public/chat.css"):
        policy = get(site, path).headers["content-security-policy"]
        directives = dict(directive.strip().split(" ", 1) for directive in policy.split(";"))
        for kind in ("img-src", "font-src", "connect-src", "default-src"):
            assert not {"*", "http:", "https:"} & set(directives[kind].split()), (path, kind, policy)


def test_another_sites_page_gets_nothing_from_the_operators_door(site):
    opened = get(site, f"/operator?token={TOKEN}")
    cookie = {"Cookie": f"operator_token={TOKEN}"}
    assert opened.status_code == 303 and "Secure" not in opened.headers["set-cookie"]
    assert get(site, "/operator/unanswered.json", headers=cookie).status_code == 200
    for origin in (WIDGET_SITE, "http://elsewhere.example", "null"):
        read = get(site, "/operator/unanswered.json", headers={**cookie, "Origin": origin})
        assert read.status_code == 403 and "access-control-allow-origin" not in read.headers, origin
        with httpx.Client(base_url=site.url, timeout=30) as client:
            preflight = client.options("/operator/unanswered.json", headers={
                "Origin": origin, "Access-Control-Request-Method": "GET"})
            sign_out = client.post("/operator/sign-out", headers={**cookie, "Origin": origin})
        assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
        assert sign_out.status_code == 403 and "set-cookie" not in sign_out.headers
    assert get(site, f"/operator/usage.csv?token={TOKEN}").status_code == 403  # the address carries it on /operator only
    behind_https = get(site, f"/operator?token={TOKEN}", headers={"X-Forwarded-Proto": "https"})
    assert "Secure" in behind_https.headers["set-cookie"]  # a proxy on this machine says the visitor used HTTPS
    not_a_proxy = get(site, f"/operator?token={TOKEN}", local="127.0.0.3", headers={"X-Forwarded-Proto": "https"})
    assert "Secure" not in not_a_proxy.headers["set-cookie"]
    with httpx.Client(base_url=site.url, timeout=30) as client:
        out = client.post("/operator/sign-out", headers={**cookie, "Origin": site.url})
    assert out.status_code == 303 and 'operator_token=""' in out.headers["set-cookie"]
    assert "Max-Age=0" in out.headers["set-cookie"]


def test_wrong_operator_tokens_from_one_address_meet_429_and_others_still_get_in(site):
    answers = [get(site, "/operator/usage.json", local="127.0.0.7", headers={"Authorization": f"Bearer guess{index}"})
               for index in range(60)]
    statuses = [answer.status_code for answer in answers]
    assert statuses[:5] == [403] * 5 and set(statuses[5:]) == {429}
    assert int(answers[-1].headers["retry-after"]) > 0
    right = {"Authorization": f"Bearer {TOKEN}"}
    assert get(site, "/operator/usage.json", local="127.0.0.7", headers=right).status_code == 429
    assert get(site, "/operator/usage.json", local="127.0.0.8", headers=right).status_code == 200


def test_a_short_operator_token_stops_the_app_at_start_with_one_line(tmp_path):
    started = subprocess.run([sys.executable, "-m", "tests.fake_app", "run", "app.py", "--headless", "--port",
                              str(free_port())], cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin", "CHAT_STATE_DIR": str(tmp_path),
                                  "CHAT_OPERATOR_TOKEN": "secret"})
    output = started.stdout + started.stderr
    assert started.returncode != 0 and "Traceback" not in output
    [line] = [line for line in output.splitlines() if "CHAT_OPERATOR_TOKEN" in line]
    assert "6 characters long; use at least 24" in line


async def test_a_rating_is_taken_back_only_by_the_browser_that_gave_it(site):
    visitor = await visit(site.url)
    await visitor.ask_and_wait("请评价")
    reply = next(data["id"] for event, data in visitor.events if event == "stream_start")
    session = visitor.socket.connection_auth["sessionId"]
    with httpx.Client(base_url=site.url, timeout=30) as giver, httpx.Client(base_url=site.url, timeout=30) as other:
        given = giver.put("/feedback", json={"feedback": {"forId": reply, "value": 1}, "sessionId": session})
        assert given.status_code == 200 and "feedback_giver" in given.headers["set-cookie"]
        feedback = {"feedbackId": given.json()["feedbackId"]}
        assert other.request("DELETE", "/feedback", json=feedback).status_code == 404
        assert giver.request("DELETE", "/feedback", json=feedback).status_code == 200
    await visitor.socket.disconnect()


def test_the_widget_takes_its_font_from_the_app(site):
    [font] = get(site, "/public/theme.json").json()["custom_fonts"]
    assert font == f"{site.url}/public/vendor/inter/inter.css" and httpx.get(font, timeout=30).status_code == 200
