"""The one engine of this process: started once, in the background, reached through one accessor, and
rebuilt if it dies.

`start_engine` begins loading on a background thread and returns at once, so the web server is up
while the model loads; `wait_for_engine` lets any session await it; `is_ready` tells the UI whether to
say it is loading. A watchdog checks the engine every second: if vLLM's processes die (a killed engine process,
the kernel's out-of-memory killer), replies in flight end with a message, the dead engine's processes
are shut down and a new engine is loaded with the same settings, while visitors are told it is loading.
Which engine it is: the in-process vLLM engine, or vLLM servers elsewhere when `CHAT_ENGINE_URLS` is set
(`engine.remote_engine`), unless a launcher puts another `Backend` in `BACKEND` before the app is imported
(`tests/fake_app.py` puts the handler tests' fake). vLLM is imported only when the in-process engine is
prepared or loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

import psutil

from engine.api import ChatEngine
from engine.prompt import ChatTokenizer, check_fits
from config.errors import EngineUnavailableError
from config.settings import Settings

log = logging.getLogger(__name__)
WATCH_INTERVAL = 1.0  # seconds between checks that the engine is alive
_lock = threading.Lock()
_engine: Future[ChatEngine] | None = None
_loader: threading.Thread | None = None  # the thread filling `_engine`
_build: Callable[[], ChatEngine] | None = None  # loads the engine with the settings it was started with
_stopping = threading.Event()  # set at shutdown: an engine that stops then is not rebuilt
_restarts = 0  # engines rebuilt after their processes died


@dataclass(frozen=True)
class Backend:
    """How this process gets its engine. `prepare` checks the settings and finds the model folder, raising
    `ChatError` with what to do (the app calls it at import, so a bad configuration stops it with one line);
    `load` builds the engine, blocking until it is ready (on a background thread); `tokenizer` gives the model's
    tokenizer, for checks at start."""

    prepare: Callable[[Settings], Path]
    load: Callable[[Settings, Path], ChatEngine]
    tokenizer: Callable[[Path], ChatTokenizer] = lambda model: _model_tokenizer(model)


def _model_tokenizer(model: Path) -> ChatTokenizer:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def _prepare_in_process(settings: Settings) -> Path:
    from modelprep.source import resolve_model
    from modelprep.preflight import check_model

    model = resolve_model(settings.model, settings.cache_dir, prepare=False, weights=settings.weights)
    check_model(model, settings)
    return model


def _load_in_process(settings: Settings, model: Path) -> ChatEngine:
    from engine.chat_engine import VllmEngine

    return VllmEngine.load(settings, model)


def _prepare_remote(settings: Settings) -> Path:
    from engine.remote_engine import prepare_remote

    return prepare_remote(settings)


def _load_remote(settings: Settings, model: Path) -> ChatEngine:
    from engine.remote_engine import RemoteEngine

    return RemoteEngine.load(settings, model)


IN_PROCESS = Backend(_prepare_in_process, _load_in_process)
REMOTE = Backend(_prepare_remote, _load_remote)
BACKEND: Backend | None = None  # another engine, put here by a launcher before the app is imported


def _backend(settings: Settings) -> Backend:
    return BACKEND or (REMOTE if settings.engine_urls else IN_PROCESS)


def prepare(settings: Settings) -> Path:
    """The model folder for `settings`, checked; raises `ChatError` with the reason otherwise."""
    return _backend(settings).prepare(settings)


def check_personas_fit(settings: Settings, model: Path, system_prompts: dict[str, str]) -> None:
    """Raise `ConfigError` saying what to set unless every persona's instructions leave room for a question and a
    reply in the model's context (`engine.prompt.check_fits`)."""
    check_fits(_backend(settings).tokenizer(model), system_prompts, settings.max_model_len, settings.max_new_tokens)


def start_engine(settings: Settings, model: Path) -> None:
    """Start loading the process-wide engine for the model folder `model` on a background thread,
    and the watchdog that rebuilds it if it dies; later calls do nothing."""
    global _build
    with _lock:
        if _engine is not None:
            return
        _build = functools.partial(_backend(settings).load, settings, model)
        _load(_build)
    threading.Thread(target=_watch, name="engine-watchdog", daemon=True).start()


def _load(build: Callable[[], ChatEngine]) -> None:
    """Put a new loading future in place (the caller holds `_lock`, and has checked that the app is not stopping) and
    fill it on a thread."""
    global _engine, _loader
    future: Future[ChatEngine] = Future()
    future.set_running_or_notify_cancel()  # a running future cannot be cancelled by one visitor's wait
    _engine = future

    def load() -> None:
        try:
            if _stopping.is_set():
                raise EngineUnavailableError("服务正在停止。 The app is stopping; the engine is not loaded.")
            engine = build()
        except BaseException as error:  # handed to every waiting session, not lost on this thread
            if not _stopping.is_set():
                log.error("The engine did not load: %s", error)
            future.set_exception(error)
            return
        if _stopping.is_set():  # the app stopped while this engine loaded: it must not outlive the app
            engine.shutdown()
        future.set_result(engine)

    _loader = threading.Thread(target=load, name="engine-loader", daemon=True)
    _loader.start()


def _watch() -> None:
    while not _stopping.wait(WATCH_INTERVAL):
        future = _engine
        if future.done() and future.exception() is None and not future.result().is_alive():
            _rebuild(future.result())


def _rebuild(dead: ChatEngine) -> None:
    global _restarts
    log.error("The engine's processes died; shutting them down and loading the model again")
    _restarts += 1

    def build() -> ChatEngine:
        dead.shutdown()  # whatever of vLLM's processes is still alive
        if _stopping.is_set():  # shutdown began meanwhile: start nothing new
            raise EngineUnavailableError("服务正在停止。 The app is stopping; the engine is not loaded again.")
        return _build()

    with _lock:
        if not _stopping.is_set():  # decided, under the lock, against a shutdown that began since the check
            _load(build)


def is_ready() -> bool:
    """Whether the engine finished loading without an error and is alive."""
    return (_engine is not None and _engine.done() and _engine.exception() is None
            and _engine.result().is_alive())


def current_engine() -> ChatEngine | None:
    """The engine if it is loaded and alive now, else None: for readers that must not wait (health, metrics)."""
    return _engine.result() if is_ready() else None


def state() -> str:
    """One word for health checks: loading, restarting (after a fault), ready, unavailable (loaded, but none
    of its servers answers), failed or stopping."""
    if _stopping.is_set():
        return "stopping"
    if _engine is None or not _engine.done():
        return "restarting" if _restarts else "loading"
    if _engine.exception() is not None:
        return "failed"
    engine = _engine.result()
    if not engine.is_alive():
        return "restarting"
    return "ready" if engine.is_ready() else "unavailable"


def restarts() -> int:
    return _restarts


async def wait_for_engine() -> ChatEngine:
    """The engine, once loaded (or reloaded); raises the loading error if it failed."""
    if _engine is None:
        raise RuntimeError("start_engine() was not called")
    while True:
        future = _engine
        engine = await asyncio.wrap_future(future)
        if engine.is_alive() or _stopping.is_set():
            return engine
        await asyncio.sleep(WATCH_INTERVAL / 4)  # dead: the watchdog is about to put a new one in place


def shutdown_engine(wait_for_loader: float = 6.0) -> None:
    """Shut the engine down (its vLLM processes with it); no rebuild after. An engine still loading, at start or
    after a fault, has processes that nothing could shut down yet: they are ended here too, and so is whatever the
    loader starts until it gives up (at most `wait_for_loader` seconds), so that no process outlives the app."""
    with _lock:  # after this, no load begins (`_rebuild` checks under the same lock)
        _stopping.set()
        engine, loader = _engine, _loader
    if engine is not None and engine.done() and engine.exception() is None:
        engine.result().shutdown()
    _end_child_processes()
    deadline = time.monotonic() + wait_for_loader
    while loader is not None and loader.is_alive() and time.monotonic() < deadline:
        loader.join(0.2)
        _end_child_processes(grace=1.0)  # what the loader started meanwhile; its load then fails and it ends
    _end_child_processes()


def _end_child_processes(grace: float = 3.0) -> None:
    """Terminate what this process started and is still running, then kill what outlives `grace` seconds."""
    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    if children:
        log.info("Ended %d processes the engine had left running", len(children))
