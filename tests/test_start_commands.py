"""The two ways people start the app, exactly as they type them, in the project folder: Chainlit's own
`chainlit run app.py` with nothing but the venv's `bin` on PATH (the presenter's command, on the default demo
model), answering in a real page; and `./run.sh` (the README's command), answering over the socket.

Under the bare console script the project folder is not on the path of the processes vLLM starts, so the
engine loads only because the set-up installs the project into .venv (a test of `python -m chainlit` would
not notice: it puts the folder on the path)."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
import zxingcpp
from PIL import Image

from harness.app_process import free_port
from harness.browser import ask_and_wait, open_chat
from tests.support import ARTIFACTS, ROOT

VENV_BIN = Path(sys.executable).parent


@dataclass
class Started:
    """An app started by a command in the project folder, its output in a log file."""

    process: subprocess.Popen
    url: str
    log_path: Path

    def wait_until_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while "Engine ready" not in self.log_path.read_text(errors="replace"):
            assert self.process.poll() is None and time.monotonic() < deadline, self.log_path.read_text()[-5000:]
            time.sleep(0.5)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)  # Ctrl-C
            self.process.wait(timeout=60)


def start(command: list[str], log_name: str, port: int, **environment: str) -> Started:
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / log_name
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log_path.open("w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    return Started(process, f"http://127.0.0.1:{port}", log_path)


@pytest.mark.e2e
def test_chainlit_run_app_py_with_only_the_venv_on_the_path_answers_in_a_page(browser):
    port = free_port()
    app = start(["chainlit", "run", "app.py", "--headless", "--host", "127.0.0.1", "--port", str(port)],
                "app-console-script.log", port, PATH=f"{VENV_BIN}:/usr/bin:/bin", HOME=os.environ["HOME"])
    try:
        app.wait_until_ready()
        page = open_chat(browser, app)
        reply = ask_and_wait(page, "你好，请用一句话介绍广州。")
        assert reply.strip() and "ModuleNotFoundError" not in app.log_path.read_text()
        page.close()
    finally:
        app.stop()


def printed_code(log: str) -> str:
    """What the QR code the app printed to its terminal decodes to: its half-block characters drawn back into
    pixels (light where the character is filled: the code is printed for a dark terminal) and read by ZXing."""
    lines = log.split("==> Scan to join", 1)[1].splitlines()[1:]
    rows = [line for line in itertools.takewhile(lambda line: line and set(line) <= set("█▀▄ "), lines)]
    halves = {"█": (255, 255), "▀": (255, 0), "▄": (0, 255), " ": (0, 0)}
    pixels = [[halves[character][half] for character in row.ljust(len(rows[0]))] for row in rows for half in (0, 1)]
    image = Image.new("L", (len(pixels[0]), len(pixels)))
    image.putdata([value for row in pixels for value in row])
    [found] = zxingcpp.read_barcodes(image.resize((image.width * 8, image.height * 8), Image.NEAREST))
    return found.text


def test_run_sh_on_the_lan_prints_its_address_and_a_qr_code_serves_the_join_page_and_answers_a_chat(tiny_model_dir):
    port = free_port()
    environment = {name: value for name, value in os.environ.items() if not name.startswith("CHAT_")}
    app = start(["./run.sh", "--headless"], "app-run-sh.log", port, **environment, CHAT_MODEL=str(tiny_model_dir),
                CHAT_HOST="0.0.0.0", CHAT_PORT=str(port), CHAT_KV_CACHE_GIB="1", CHAT_MAX_NEW_TOKENS="16")
    try:
        app.wait_until_ready()
        log = app.log_path.read_text()
        lan = [f"http://{entry.address}:{port}" for entries in psutil.net_if_addrs().values() for entry in entries
               if entry.family == socket.AF_INET and not entry.address.startswith("127.")]
        printed = re.search(r"==> Visitors join at: (.*)", log).group(1).split()
        assert printed and set(printed) <= set(lan), (printed, lan)
        assert printed_code(log) == printed[0]
        # The projection page, reached at that address from the network side, shows the same code and address.
        page = httpx.get(f"{printed[0]}/join", timeout=30)
        assert page.status_code == 200 and f"data-join-address>{printed[0]}<" in page.text
        projected = httpx.get(f"{printed[0]}/join/qr.png", timeout=30)
        assert [found.text for found in zxingcpp.read_barcodes(Image.open(io.BytesIO(projected.content)))] == [printed[0]]
        # A visitor in a process of its own: this module's browser keeps an event loop running in this one.
        visitor = subprocess.run([sys.executable, "-m", "harness.visitor", app.url, "你好"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=120)
        assert visitor.returncode == 0, visitor.stderr[-3000:]
        answered = json.loads(visitor.stdout)
        assert answered["tokens"] == 16 and answered["text"]
    finally:
        app.stop()
