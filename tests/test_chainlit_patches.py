"""Each change `web/chainlit_patches.py` makes to Chainlit takes effect on the installed Chainlit (an upgrade that turns
one into a no-op fails here), no other module changes Chainlit's server, and a Chainlit outside the tested versions
stops the app at start with one line."""

import ast
import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from config.errors import ChatError
from tests.support import ROOT
from web.chainlit_patches import TESTED, require_tested_chainlit

pytestmark = pytest.mark.fast

# Run in a process of its own: the changes are to Chainlit's one server, which a first request freezes.
PROBE = r"""
import asyncio, json
import chainlit.server as server
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from web import chainlit_patches as patches

seen = {}
patches.route_first(Route("/probe", lambda request: PlainTextResponse("ours")))

class Stamp:
    def __init__(self, app):
        self.app = app
    async def __call__(self, scope, receive, send):
        async def stamped(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message["headers"], (b"x-probe", b"1")]
            await send(message)
        await self.app(scope, receive, send if scope["type"] != "http" else stamped)

patches.add_middleware(Stamp)
patches.accept_socket_from(lambda origin, environ: origin == "https://host.example", ("https://host.example",))
patches.rewrite_page(lambda page, root: page.replace("<head>", "<head><!-- rewritten -->"))

def recording(handler):
    async def recorded(sid, *payload):
        seen["stop"] = sid
    return recorded

patches.guard_socket_events({"stop": recording})
asyncio.run(server.sio._trigger_event("stop", "/", "sid-1"))

client = TestClient(server.app)
probe = client.get("/probe")
page = client.get("/")
polling = "/ws/socket.io/?EIO=4&transport=polling"
socket = client.get(polling, headers={"Origin": "https://host.example"})
stranger = client.get(polling, headers={"Origin": "https://elsewhere.example"})
preflight = client.options("/project/settings", headers={"Origin": "https://elsewhere.example",
                                                        "Access-Control-Request-Method": "GET"})
print(json.dumps({
    "route": probe.text, "middleware": probe.headers.get("x-probe"), "page": "<!-- rewritten -->" in page.text,
    "socket_event": seen.get("stop"),
    "socket_origin": socket.status_code, "socket_cors": socket.headers.get_list("access-control-allow-origin"),
    "stranger": stranger.status_code, "preflight": preflight.headers.get("access-control-allow-origin"),
}))
"""


def test_each_change_takes_effect_on_the_installed_chainlit():
    ran = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert seen["route"] == "ours", "a route put first is not reached before Chainlit's page"
    assert seen["middleware"] == "1", "middleware added is not in the stack"
    assert seen["page"], "the page template rewritten is not the one served"
    assert seen["socket_event"] == "sid-1", "a socket handler replaced is not the one called"
    assert seen["socket_origin"] == 200 and seen["socket_cors"] == ["https://host.example"], \
        "the socket from an allowed site must be answered with one copy of the CORS header"
    assert seen["stranger"] != 200, "the socket's origin check is not the app's"
    assert seen["preflight"] is None, "Chainlit's CORS middleware still allows origins outside CHAT_ALLOWED_ORIGINS"


def test_no_other_module_changes_chainlit():
    """Only `web/chainlit_patches.py` imports Chainlit's server or assigns to what it imports from Chainlit (a chat's
    own state, `cl.context`, is the chat's to set)."""
    ours = [path for path in sorted(ROOT.glob("*.py"))]
    ours += [path for folder in sorted(ROOT.iterdir()) if folder.is_dir() and folder.name not in {"tests", "node_modules"}
             and not folder.name.startswith((".", "_")) for path in sorted(folder.rglob("*.py"))]
    changing = set()
    for path in ours:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        chainlits = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "chainlit":
                chainlits |= {alias.asname or alias.name for alias in node.names}
                if node.module == "chainlit" and any(alias.name == "server" for alias in node.names):
                    changing.add(f"{path.relative_to(ROOT)} imports chainlit.server")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "chainlit":
                        chainlits.add(alias.asname or alias.name.split(".")[0])
                    if alias.name == "chainlit.server":
                        changing.add(f"{path.relative_to(ROOT)} imports chainlit.server")
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                chain = []
                while isinstance(target, (ast.Attribute, ast.Subscript)):
                    chain.append(target.attr if isinstance(target, ast.Attribute) else "[]")
                    target = target.value
                if chain and isinstance(target, ast.Name) and target.id in chainlits and "context" not in chain:
                    changing.add(f"{path.relative_to(ROOT)}:{node.lineno} assigns to {target.id}")
    changing = {line for line in changing if not line.startswith("web/chainlit_patches.py")}
    assert not changing, sorted(changing)


def test_the_installed_chainlit_is_one_tested():
    assert version("chainlit") in TESTED
    require_tested_chainlit()


def test_another_chainlit_stops_the_app_at_start_with_one_line():
    with pytest.raises(ChatError) as refused:
        require_tested_chainlit("2.13.0")
    assert "\n" not in str(refused.value) and "Chainlit 2.13.0" in str(refused.value)
    # And from the app's start, as a user starts it: one line, and a failing exit status.
    script = ("import importlib.metadata as m; real = m.version; "
              "m.version = lambda name: '9.0.0' if name == 'chainlit' else real(name); import app")
    ran = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode != 0
    assert "Chainlit 9.0.0" in ran.stderr.strip().splitlines()[-1]
