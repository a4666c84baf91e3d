"""Stopping the app while its engine is being rebuilt (the real app on the tiny model, real vLLM processes):
SIGTERM at that moment, as a supervisor sends it, leaves no process of the app within ten seconds."""

from __future__ import annotations

import os
import signal
import time

import psutil

from harness.browser import wait_until
from tests.conftest import ARTIFACTS, RunningApp


def test_sigterm_while_the_engine_is_rebuilt_leaves_no_process(tiny_model_dir):
    ARTIFACTS.mkdir(exist_ok=True)
    running = RunningApp(tiny_model_dir, ARTIFACTS / "app-rebuild-sigterm.log")
    try:
        running.wait_until_ready()
        app = psutil.Process(running.process.pid)
        first_core = next(proc for proc in running.engine_processes() if "EngineCore" in " ".join(proc.cmdline()))
        first_core.kill()  # as the out-of-memory killer would
        assert wait_until(lambda: "loading the model again" in running.log(), timeout=15)
        assert wait_until(lambda: any("EngineCore" in " ".join(proc.cmdline()) and proc.pid != first_core.pid
                                      for proc in running.engine_processes()), timeout=60)
        assert running.log().count("Engine ready") == 1  # still rebuilding
        seen = {proc.pid: proc for proc in app.children(recursive=True)}
        os.kill(running.process.pid, signal.SIGTERM)
        stopped = time.monotonic()
        while time.monotonic() - stopped < 10 and running.process.poll() is None:
            seen.update({proc.pid: proc for proc in psutil.Process(running.process.pid).children(recursive=True)}
                        if psutil.pid_exists(running.process.pid) else {})
            time.sleep(0.2)
        assert running.process.poll() is not None, running.log()[-3000:]
        time.sleep(max(0.0, 10 - (time.monotonic() - stopped)))
        alive = [proc for proc in seen.values() if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE]
        assert not alive, [" ".join(proc.cmdline()) for proc in alive]
    finally:
        running.stop()
