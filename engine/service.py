"""The one engine of this process: started once, in the background, and reached through one accessor.

`start_engine` begins loading on a background thread and returns at once, so the web server is up
while the model loads; `wait_for_engine` lets any session await it; `is_ready` tells the UI whether to
say it is loading. Tests hand in their own loader (a fake or a tiny real engine) through `start_engine`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Callable

from engine.chat_engine import ChatEngine
from engine.config import Settings

log = logging.getLogger(__name__)
_lock = threading.Lock()
_engine: Future[ChatEngine] | None = None


def start_engine(settings: Settings, model: Path,
                 loader: Callable[[Settings, Path], ChatEngine] = ChatEngine.load) -> None:
    """Start loading the process-wide engine for the model folder `model` on a background thread;
    later calls do nothing."""
    global _engine
    with _lock:
        if _engine is not None:
            return
        _engine = Future()
        # A running future cannot be cancelled by one visitor's cancelled wait.
        _engine.set_running_or_notify_cancel()
    future = _engine

    def load() -> None:
        try:
            future.set_result(loader(settings, model))
        except BaseException as error:  # handed to every waiting session, not lost on this thread
            log.error("The engine did not load: %s", error)
            future.set_exception(error)

    threading.Thread(target=load, name="engine-loader", daemon=True).start()


def is_ready() -> bool:
    """Whether the engine finished loading without an error."""
    return _engine is not None and _engine.done() and _engine.exception() is None


async def wait_for_engine() -> ChatEngine:
    """The engine, once loaded; raises the loading error if it failed."""
    if _engine is None:
        raise RuntimeError("start_engine() was not called")
    return await asyncio.wrap_future(_engine)


def shutdown_engine() -> None:
    """Shut the engine down if it finished loading (its vLLM processes with it)."""
    if is_ready():
        _engine.result().shutdown()
