"""The app as its users start it: Chainlit's own command, `chainlit run app.py`, in the project folder, in a
process group of its own, its log in a file.

Used by the benchmark's UI path and by the tests. Stopped the way a presenter stops it, with Ctrl-C. Each
instance runs in a folder of its own that links to the project's files: Chainlit deletes the `.files`
folder of its working folder when it stops, which breaks any other instance running from the same folder.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from config.settings import PROJECT_ROOT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppProcess:
    """`chainlit run app.py` in a subprocess of its own process group, with its log in a file."""

    def __init__(self, model: Path | str, log_path: Path, project: Path = PROJECT_ROOT, command: str = "chainlit",
                 host: str = "127.0.0.1", **env: str) -> None:
        """`project`: the checkout to run (another commit's worktree, for a comparison; its folder then goes first
        on the processes' path, ahead of the checkout installed in .venv); `command`: "chainlit" for Chainlit's
        console script, or a module that runs Chainlit's command line (`tests.fake_app` serves the app on the
        tests' scripted engine); `host`: the address to listen on (`0.0.0.0`: the LAN too; `url` stays loopback)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.folder = Path(tempfile.mkdtemp(prefix="chat-app-"))
        # A state folder of its own (session secret, conversations) unless the caller gives one.
        environment = {**os.environ, "CHAT_MODEL": str(model), "CHAT_STATE_DIR": str(self.folder / "state"), **env}
        if project.resolve() != PROJECT_ROOT.resolve():
            environment["PYTHONPATH"] = str(project)
        for entry in project.iterdir():
            if entry.name != ".files":
                (self.folder / entry.name).symlink_to(entry)
        launcher = ([str(Path(sys.executable).parent / "chainlit")] if command == "chainlit"
                    else [sys.executable, "-m", command])
        self.process = subprocess.Popen(
            [*launcher, "run", "app.py", "--headless", "--host", host, "--port", str(self.port)],
            cwd=self.folder, env=environment, stdout=log_path.open("w"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_until_ready(self, timeout: float = 180) -> None:
        """Until the engine is ready and the web server takes connections: the engine loads beside the server's
        start, so on a fast (fake) engine its line can come before the port is open."""
        deadline = time.monotonic() + timeout
        while "Engine ready" not in self.log() or not self._listening():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the app did not start; its log:\n{self.log()[-5000:]}")
            time.sleep(0.5)

    def ready_after(self, started: float, timeout: float = 300) -> float:
        """Seconds from `started` (a `time.perf_counter()`) until `/healthz` says ready: the engine loaded and the
        page served."""
        deadline = started + timeout
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the app stopped; its log:\n{self.log()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the app was not ready in {timeout} s; its log:\n{self.log()[-3000:]}")

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

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
        shutil.rmtree(self.folder, ignore_errors=True)  # the links only, never what they point to

    def __enter__(self) -> AppProcess:
        """The app, once its engine is ready; stopped when the block ends, however it ends."""
        try:
            self.wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_) -> None:
        self.stop()
