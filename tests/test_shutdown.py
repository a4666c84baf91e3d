"""Stopping the app while its engine is being rebuilt (the real app on the tiny model, real vLLM processes):
SIGTERM at any moment of the rebuild, as a supervisor sends it, leaves no process of the app within ten seconds.
The moments tried: at once after the engine's processes died (the watchdog has not yet decided), just after it
decided to rebuild (before a new engine process exists), and once the new engine process runs. A process that the
app started after its children were ended would be orphaned (its parent gone), and one spawned a moment before has
no vLLM title yet, so the test looks for every process working in the app's folder, whoever its parent is now."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from harness.browser import wait_until
from tests.support import ARTIFACTS, RunningApp


def is_engine_core(proc: psutil.Process) -> bool:
    try:
        return "EngineCore" in " ".join(proc.cmdline()) or proc.name().startswith("VLLM::")
    except psutil.Error:
        return False


def left_behind(running: RunningApp) -> list[psutil.Process]:
    """The app's processes still running: every one works in the app's folder, as it inherited it."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.cwd() == str(running.folder) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("moment", ["died", "decided", "spawned"])
def test_sigterm_at_any_moment_of_an_engine_rebuild_leaves_no_process(tiny_model_dir, moment):
    ARTIFACTS.mkdir(exist_ok=True)
    running = RunningApp(tiny_model_dir, ARTIFACTS / f"app-rebuild-sigterm-{moment}.log")
    try:
        running.wait_until_ready()
        first_core = next(proc for proc in running.engine_processes() if is_engine_core(proc))
        first_core.kill()  # as the out-of-memory killer would
        if moment in ("decided", "spawned"):
            deadline = time.monotonic() + 15
            while "loading the model again" not in running.log():  # polled often: the next moment is short
                assert time.monotonic() < deadline
                time.sleep(0.01)
        if moment == "spawned":
            assert wait_until(lambda: any(is_engine_core(proc) and proc.pid != first_core.pid
                                          for proc in running.engine_processes()), timeout=60)
        assert running.log().count("Engine ready") == 1  # still rebuilding
        os.kill(running.process.pid, signal.SIGTERM)
        stopped = time.monotonic()
        assert wait_until(lambda: running.process.poll() is not None, timeout=10), running.log()[-3000:]
        time.sleep(max(0.0, 10 - (time.monotonic() - stopped)))
        alive = left_behind(running)
        assert not alive, [" ".join(proc.cmdline()) for proc in alive]
    finally:
        running.stop()
