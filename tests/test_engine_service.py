"""The engine service with a fake backend, in seconds: loading in the background, the watchdog's rebuild of an engine
that died, a load that fails, and a shutdown that leaves no engine behind, also one that lands while an engine
loads."""

import asyncio
import threading
import time
from pathlib import Path

import pytest

from config.errors import ModelLoadError
from config.settings import load_settings
from engine.service import Backend, EngineService

pytestmark = pytest.mark.fast
SETTINGS = load_settings({})


class Engine:
    model_name = "fake"

    def __init__(self) -> None:
        self.alive, self.stopped = True, False

    def is_alive(self) -> bool:
        return self.alive

    def is_ready(self) -> bool:
        return True

    def shutdown(self) -> None:
        self.alive, self.stopped = False, True


class Loads:
    """The backend's `load`: each call waits for `go` (set by default), then fails with `error` or builds an
    engine."""

    def __init__(self) -> None:
        self.engines: list[Engine] = []
        self.go = threading.Event()
        self.go.set()
        self.error: Exception | None = None

    def __call__(self, settings, model: Path) -> Engine:
        self.go.wait(10)
        if self.error:
            raise self.error
        self.engines.append(Engine())
        return self.engines[-1]


def service_with(loads: Loads) -> tuple[EngineService, list[float]]:
    ended: list[float] = []
    backend = Backend(locate=lambda settings: Path("fake-model"), load=loads)
    return EngineService(SETTINGS, backend, watch_interval=0.05, end_children=ended.append), ended


def until(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


async def test_the_engine_loads_in_the_background_and_is_rebuilt_when_it_dies():
    loads = Loads()
    loads.go.clear()
    service, _ = service_with(loads)
    service.start()
    service.start()  # a second start does nothing
    assert service.status() == "loading" and not service.is_ready() and service.current() is None
    loads.go.set()
    first = await asyncio.wait_for(service.wait(), 5)
    assert service.status() == "ready" and service.current() is first and len(loads.engines) == 1
    first.alive = False  # its processes died
    assert until(lambda: service.restarts == 1)
    second = await asyncio.wait_for(service.wait(), 5)
    assert second is not first and first.stopped and service.status() == "ready" and len(loads.engines) == 2
    service.shutdown()
    assert second.stopped and service.status() == "stopping"


async def test_a_load_that_fails_is_reported_to_every_waiting_chat():
    loads = Loads()
    loads.error = ModelLoadError("CHAT_MODEL: no such folder")
    service, _ = service_with(loads)
    service.start()
    for _ in range(2):
        with pytest.raises(ModelLoadError, match="no such folder"):
            await asyncio.wait_for(service.wait(), 5)
    assert service.status() == "failed" and service.restarts == 0
    service.shutdown()


def test_a_shutdown_while_the_engine_loads_ends_it_and_starts_nothing_after():
    loads = Loads()
    loads.go.clear()
    service, ended = service_with(loads)
    service.start()
    stopping = threading.Thread(target=service.shutdown, kwargs={"wait_for_loader": 5.0})
    stopping.start()
    time.sleep(0.3)
    assert ended, "what the loader started meanwhile is ended while it loads"
    loads.go.set()  # the load completes after the shutdown began
    stopping.join(10)
    assert not stopping.is_alive() and loads.engines[0].stopped and service.status() == "stopping"
    loads.engines[0].alive = False
    time.sleep(0.3)
    assert len(loads.engines) == 1 and service.restarts == 0  # no rebuild after shutdown


async def test_an_engine_that_dies_during_shutdown_is_not_rebuilt():
    loads = Loads()
    service, _ = service_with(loads)
    service.start()
    engine = await asyncio.wait_for(service.wait(), 5)
    service.shutdown()
    engine.alive = False
    time.sleep(0.3)
    assert service.restarts == 0 and len(loads.engines) == 1


def test_ending_the_engines_processes_leaves_the_apps_others_running():
    """At shutdown the engine's processes (titled as vLLM titles its engine core) end, with what they started, and so
    does an engine core spawned a moment ago, before it titles itself (named as vLLM names it); another child of the
    app (the document reader, here sleepers, started both ways) is not the engine's to end. In a process of its own:
    this one may hold the tests' engine."""
    import json
    import subprocess
    import sys

    from tests.support import ROOT

    script = """
import json, multiprocessing, multiprocessing.connection, subprocess, sys, time
import psutil
from engine.service import end_engine_processes
if __name__ == "__main__":
    titled = ("import setproctitle, subprocess, sys, time; setproctitle.setproctitle('VLLM::EngineCore'); "
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)")
    core = subprocess.Popen([sys.executable, "-c", titled])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    spawn = multiprocessing.get_context("spawn")
    untitled = spawn.Process(target=time.sleep, args=(60,), name="EngineCore")
    reader = spawn.Process(target=time.sleep, args=(60,), name="document-reader")
    untitled.start()
    reader.start()
    deadline = time.monotonic() + 20
    while not psutil.Process(core.pid).children() and time.monotonic() < deadline:
        time.sleep(0.1)
    its_child = psutil.Process(core.pid).children()[0]
    end_engine_processes(grace=3.0)
    print(json.dumps({"core_ended": core.wait(timeout=10) is not None,
                      "its_child_ended": not its_child.is_running() or its_child.status() == psutil.STATUS_ZOMBIE,
                      "untitled_ended": multiprocessing.connection.wait([untitled.sentinel], timeout=10) != [],
                      "other_running": other.poll() is None, "reader_running": reader.is_alive()}))
    other.kill()
    reader.kill()
"""
    ran = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == {
        "core_ended": True, "its_child_ended": True, "untitled_ended": True, "other_running": True,
        "reader_running": True}
