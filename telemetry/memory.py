"""Memory, measured: the app's whole process tree and the machine, and the floor of available memory below which no
new reply starts.

The app's figure is PSS (proportional set size) summed over this process and every child (vLLM's
engine core): pages shared between them (torch, libraries) count once, split among their
users, where summing RSS would count them in every process. Knows nothing of the UI.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from config.errors import MemoryLowError

MIB = 1024**2
GIB = 1024**3


@dataclass(frozen=True)
class MemoryReading:
    app_pss: int  # bytes, this process and all its children
    system_used: int
    system_available: int
    system_total: int


def tree_pss(pid: int) -> int:
    """PSS in bytes of process `pid` and all its descendants."""
    root = psutil.Process(pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            total += process.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # a child that ended between listing and reading holds no memory
    return total


class MemoryMonitor:
    """Memory readings shared by every session of the app.

    Reading PSS makes the kernel walk every page of every process (docs/design-figures.md), CPU taken
    from the engine when the cores are busy, far too much to repeat for every sidebar refresh of every
    session. So the app's PSS (which hardly moves once the model and its preallocated KV cache are in)
    is re-measured at most every `max_age` seconds, and the system figures at most every `system_max_age`
    (eight chats streaming would otherwise read them 20 times a second).
    """

    def __init__(self, max_age: float = 30.0, system_max_age: float = 0.25, pid: int | None = None) -> None:
        self.max_age = max_age
        self.system_max_age = system_max_age
        self._pid = pid or os.getpid()
        self._lock = threading.Lock()
        self._pss = 0
        self._measured_at = float("-inf")
        self._system = psutil.virtual_memory()
        self._system_read_at = time.monotonic()

    def read(self) -> MemoryReading:
        with self._lock:
            if time.monotonic() - self._measured_at >= self.max_age:
                self._pss = tree_pss(self._pid)
                self._measured_at = time.monotonic()
            if time.monotonic() - self._system_read_at >= self.system_max_age:
                self._system = psutil.virtual_memory()
                self._system_read_at = time.monotonic()
            pss, system = self._pss, self._system
        return MemoryReading(pss, system.total - system.available, system.available, system.total)


class MemoryFloor:
    """Refuses to start a reply while the machine's available memory is below `min_available` bytes.

    Replies already running are not touched; as soon as memory is available again, replies start again.
    """

    def __init__(self, min_available: int, available: Callable[[], int] = lambda: psutil.virtual_memory().available):
        self.min_available = min_available
        self._available = available

    def is_low(self) -> bool:
        return self._available() < self.min_available

    def check(self) -> None:
        available = self._available()
        if available < self.min_available:
            raise MemoryLowError(
                f"服务器内存不足（可用 {available / GIB:.1f} GiB，低于 {self.min_available / GIB:.1f} GiB），"
                "暂不开始新的回答，请稍后再试。 The server is low on memory "
                f"({available / GIB:.1f} GiB available, below {self.min_available / GIB:.1f} GiB), so no new "
                "reply is started; replies in progress finish. Please try again in a moment."
            )


def memory_figures(reading: MemoryReading, floor: MemoryFloor) -> dict:
    """A reading as the sidebar shows it: MiB, and whether available memory is below the floor."""
    return {"app_mib": round(reading.app_pss / MIB), "used_mib": round(reading.system_used / MIB),
            "available_mib": round(reading.system_available / MIB), "low": reading.system_available < floor.min_available,
            "min_available_mib": round(floor.min_available / MIB)}
