"""Shared fixtures: the tiny model (built once per run), one real engine, one running app, one browser.

Everything expensive is session-scoped and shared. Nothing here downloads anything.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from tests.tiny_model import build_tiny_qwen

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen(tmp_path_factory.mktemp("models") / "tiny-qwen2")


@pytest.fixture(scope="session")
def paced_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 440 MB of random weights that stream some 20 tokens/s here, as a real CPU model does."""
    return build_tiny_qwen(tmp_path_factory.mktemp("models") / "paced-qwen2", hidden_size=1536, num_layers=12)


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    """The bundled demo model, which ./test.sh's set-up prepares: a test never downloads it."""
    from engine.config import load_settings
    from engine.errors import ChatError
    from engine.model_source import resolve_model

    try:
        return resolve_model("", load_settings().cache_dir, prepare=False)
    except ChatError as error:
        pytest.fail(f"{error} (./test.sh prepares it before running the tests)")


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def engine(tiny_model_dir: Path):
    from engine.chat_engine import ChatEngine
    from engine.config import load_settings

    settings = load_settings({"CHAT_MODEL": str(tiny_model_dir), "CHAT_KV_CACHE_GIB": "1",
                              "CHAT_MAX_MODEL_LEN": "2048"})
    chat_engine = ChatEngine.load(settings, tiny_model_dir)
    yield chat_engine
    chat_engine.shutdown()


def smaps_rollup_pss(pid: int) -> int:
    """The kernel's own PSS figure for one process, in bytes."""
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no Pss line for process {pid}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RunningApp:
    """`chainlit run app.py` in a subprocess of its own process group, with its log in a file."""

    def __init__(self, model: Path | str, log_path: Path, **env: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        environment = {**os.environ, "CHAT_MODEL": str(model), "CHAT_KV_CACHE_GIB": "1", **env}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "chainlit", "run", "app.py", "--headless", "--host", "127.0.0.1",
             "--port", str(self.port)],
            cwd=ROOT, env=environment, stdout=log_path.open("w"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_until_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while "Engine ready" not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the app did not start; its log:\n{self.log()[-5000:]}")
            time.sleep(0.5)

    def engine_processes(self) -> list[psutil.Process]:
        return [child for child in psutil.Process(self.process.pid).children(recursive=True)
                if "VLLM::" in " ".join(child.cmdline())]

    def reply_stats(self) -> list[str]:
        return re.findall(r"Reply: .*", self.log())

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 2)  # what Ctrl-C in a terminal sends: SIGINT to the group
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)


@pytest.fixture(scope="session")
def app(paced_model_dir: Path) -> Iterator[RunningApp]:
    ARTIFACTS.mkdir(exist_ok=True)
    # Greedy, so every reply runs to its budget: about ten seconds, time to watch it stream and stop it.
    running = RunningApp(paced_model_dir, ARTIFACTS / "app.log", CHAT_TEMPERATURE="0", CHAT_MAX_NEW_TOKENS="200")
    running.wait_until_ready()
    yield running
    running.stop()
