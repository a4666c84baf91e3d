"""The one engine of this process: started once, in the background, reached through one object, and rebuilt if it
dies.

`EngineService.start` begins loading on a background thread and returns at once, so the web server is up while the
model loads; `wait` lets any session await it; `is_ready` tells the UI whether to say it is loading. A watchdog
checks the engine every second: if vLLM's processes die (a killed engine process, the kernel's out-of-memory
killer), replies in flight end with a message, the dead engine's processes are shut down and a new engine is loaded
with the same settings, while visitors are told it is loading. Which engine it is (a `Backend`): the in-process
vLLM engine, or vLLM servers elsewhere when `CHAT_ENGINE_URLS` is set (`engine.remote_engine`), unless a launcher
puts another one in `BACKEND` before the app is built (`tests/fake_app.py` puts the handler tests' fake). vLLM is
imported only when the in-process engine is located or loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from config.errors import EngineUnavailableError
from config.settings import Settings
from engine.api import Capabilities, ChatEngine
from engine.prompt import ChatTokenizer, check_fits
from engine.thinking import has_switch

log = logging.getLogger(__name__)
ENGINE_TITLE = "VLLM::"  # how vLLM titles its processes (its engine core, any worker): VLLM_PROCESS_NAME_PREFIX
ENGINE_CORE = "EngineCore"  # vLLM's name for its engine core's `multiprocessing.Process` (vllm/v1/engine/utils.py)
STOPPING = "服务正在停止。 The app is stopping; the engine is not loaded."


def _model_tokenizer(model: Path) -> ChatTokenizer:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


@dataclass(frozen=True)
class Backend:
    """How this process gets its engine. `locate` checks the settings and finds the model folder, raising `ChatError`
    with what to do (the app calls it when it is built, so a bad configuration stops it with one line); `load` builds
    the engine, blocking until it is ready (on a background thread); `tokenizer` gives the model's tokenizer, for
    checks at start; `capabilities`, what its engines can do."""

    locate: Callable[[Settings], Path]
    load: Callable[[Settings, Path], ChatEngine]
    tokenizer: Callable[[Path], ChatTokenizer] = _model_tokenizer
    capabilities: Capabilities = field(default_factory=Capabilities)


def _locate_in_process(settings: Settings) -> Path:
    from modelprep.preflight import check_model
    from modelprep.source import resolve_model

    model = resolve_model(settings.model, settings.cache_dir, prepare=False, weights=settings.weights)
    check_model(model, settings)
    return model


def _load_in_process(settings: Settings, model: Path) -> ChatEngine:
    from engine.vllm_engine import VllmEngine

    return VllmEngine.load(settings, model)


def _locate_remote(settings: Settings) -> Path:
    from engine.remote_engine import locate_remote_model

    return locate_remote_model(settings)


def _load_remote(settings: Settings, model: Path) -> ChatEngine:
    from engine.remote_engine import RemoteEngine

    return RemoteEngine.load(settings, model)


IN_PROCESS = Backend(_locate_in_process, _load_in_process)
REMOTE = Backend(_locate_remote, _load_remote, capabilities=Capabilities(token_view=False, compare=False))
BACKEND: Backend | None = None  # another engine, put here by a launcher before the app is built


def end_engine_processes(grace: float = 3.0) -> None:
    """Terminate the engine's processes that are still running (vLLM titles them `VLLM::…`: its engine core and any
    worker), and what they started, then kill what outlives `grace` seconds. An engine core spawned a moment ago has
    no title yet (on a slow CPU it imports vLLM for over ten seconds first): it is known by the name of its
    `multiprocessing` process. The app's other children (the document reader) are theirs to end."""
    spawned = {process.pid for process in multiprocessing.active_children() if process.name.startswith(ENGINE_CORE)}
    engines = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.pid in spawned or ENGINE_TITLE in " ".join(child.cmdline()):
                engines += [child, *child.children(recursive=True)]
    engines = list({process.pid: process for process in engines}.values())
    for process in engines:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    _, alive = psutil.wait_procs(engines, timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    if engines:
        log.info("Ended %d processes the engine had left running", len(engines))


class EngineService:
    """The engine of `settings`' model, from `backend`: located when made, loaded by `start`, rebuilt by a watchdog.
    `end_children` ends the engine's processes still running (at shutdown; tests hand in their own)."""

    def __init__(self, settings: Settings, backend: Backend, watch_interval: float = 1.0,
                 end_children: Callable[[float], None] = end_engine_processes) -> None:
        self.settings = settings
        self.backend = backend
        self.model = backend.locate(settings)
        self.capabilities = backend.capabilities
        self.thinking_switch = has_switch(self.model)  # the chat template can think, on request (Qwen3's)
        self.restarts = 0  # engines rebuilt after their processes died
        self._watch_interval = watch_interval
        self._end_children = end_children
        self._lock = threading.Lock()
        self._engine: Future[ChatEngine] | None = None
        self._loader: threading.Thread | None = None  # the thread filling `_engine`
        self._stopping = threading.Event()  # set at shutdown: an engine that stops then is not rebuilt

    @classmethod
    def for_settings(cls, settings: Settings) -> EngineService:
        return cls(settings, BACKEND or (REMOTE if settings.engine_urls else IN_PROCESS))

    def check_fits(self, system_prompts: dict[str, str]) -> None:
        """Raise `ConfigError` saying what to set unless every system prompt leaves room for a question and a reply
        in the model's context (`engine.prompt.check_fits`)."""
        check_fits(self.backend.tokenizer(self.model), system_prompts, self.settings.max_model_len,
                   self.settings.max_new_tokens)

    def start(self) -> None:
        """Start loading the engine on a background thread, and the watchdog that rebuilds it if it dies; later
        calls do nothing."""
        with self._lock:
            if self._engine is not None:
                return
            self._load(functools.partial(self.backend.load, self.settings, self.model))
        threading.Thread(target=self._watch, name="engine-watchdog", daemon=True).start()

    def _load(self, build: Callable[[], ChatEngine]) -> None:
        """Put a new loading future in place (the caller holds `_lock`, and has checked that the app is not
        stopping) and fill it on a thread."""
        future: Future[ChatEngine] = Future()
        future.set_running_or_notify_cancel()  # a running future cannot be cancelled by one visitor's wait
        self._engine = future

        def load() -> None:
            try:
                if self._stopping.is_set():
                    raise EngineUnavailableError(STOPPING)
                engine = build()
            except BaseException as error:  # handed to every waiting session, not lost on this thread
                if not self._stopping.is_set():
                    log.error("The engine did not load: %s", error)
                future.set_exception(error)
                return
            if self._stopping.is_set():  # the app stopped while this engine loaded: it must not outlive the app
                engine.shutdown()
            future.set_result(engine)

        self._loader = threading.Thread(target=load, name="engine-loader", daemon=True)
        self._loader.start()

    def _watch(self) -> None:
        while not self._stopping.wait(self._watch_interval):
            future = self._engine
            if future.done() and future.exception() is None and not future.result().is_alive():
                self._rebuild(future.result())

    def _rebuild(self, dead: ChatEngine) -> None:
        log.error("The engine's processes died; shutting them down and loading the model again")
        self.restarts += 1

        def build() -> ChatEngine:
            dead.shutdown()  # whatever of vLLM's processes is still alive
            if self._stopping.is_set():  # shutdown began meanwhile: start nothing new
                raise EngineUnavailableError(STOPPING)
            return self.backend.load(self.settings, self.model)

        with self._lock:
            if not self._stopping.is_set():  # decided, under the lock, against a shutdown that began since the check
                self._load(build)

    def is_ready(self) -> bool:
        """Whether the engine finished loading without an error and is alive."""
        future = self._engine
        return (future is not None and future.done() and future.exception() is None
                and future.result().is_alive())

    def current(self) -> ChatEngine | None:
        """The engine if it is loaded and alive now, else None: for readers that must not wait (health, metrics)."""
        return self._engine.result() if self.is_ready() else None

    def status(self) -> str:
        """One word for health checks: loading, restarting (after a fault), ready, unavailable (loaded, but none
        of its servers answers), failed or stopping."""
        future = self._engine
        if self._stopping.is_set():
            return "stopping"
        if future is None or not future.done():
            return "restarting" if self.restarts else "loading"
        if future.exception() is not None:
            return "failed"
        engine = future.result()
        if not engine.is_alive():
            return "restarting"
        return "ready" if engine.is_ready() else "unavailable"

    async def wait(self) -> ChatEngine:
        """The engine, once loaded (or reloaded); raises the loading error if it failed."""
        if self._engine is None:
            raise RuntimeError("EngineService.start() was not called")
        while True:
            engine = await asyncio.wrap_future(self._engine)
            if engine.is_alive() or self._stopping.is_set():
                return engine
            await asyncio.sleep(self._watch_interval / 4)  # dead: the watchdog is about to put a new one in place

    def shutdown(self, wait_for_loader: float = 6.0) -> None:
        """Shut the engine down (its vLLM processes with it); no rebuild after. An engine still loading, at start or
        after a fault, has processes that nothing could shut down yet: they are ended here too, and so is whatever
        the loader starts until it gives up (at most `wait_for_loader` seconds), so that no process outlives the
        app."""
        with self._lock:  # after this, no load begins (`_rebuild` checks under the same lock)
            self._stopping.set()
            engine, loader = self._engine, self._loader
        if engine is not None and engine.done() and engine.exception() is None:
            engine.result().shutdown()
        self._end_children(3.0)
        deadline = time.monotonic() + wait_for_loader
        while loader is not None and loader.is_alive() and time.monotonic() < deadline:
            loader.join(0.2)
            self._end_children(1.0)  # what the loader started meanwhile; its load then fails and it ends
        self._end_children(3.0)
