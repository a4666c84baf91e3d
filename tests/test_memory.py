"""Memory figures against the kernel's own accounting, the shared monitor, and the floor."""

import subprocess
import sys
import time

import psutil
import pytest

import telemetry.memory as memory
from config.errors import MemoryLowError
from engine.api import EngineState
from telemetry.memory import GIB, MemoryFloor, MemoryMonitor, MemoryReading, tree_pss
from tests.support import smaps_rollup_pss

HOLD_MEMORY = "import sys, time; x = bytearray(50_000_000); time.sleep(30)"


def test_tree_pss_is_the_kernels_pss_of_every_process_in_the_tree():
    # A process holding 50 MB that starts a child holding another 50 MB.
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.Popen([sys.executable, "
                               f"'-c', {HOLD_MEMORY!r}]); {HOLD_MEMORY}"])
    try:
        time.sleep(2.0)  # both have allocated
        pids = [parent.pid] + [child.pid for child in psutil.Process(parent.pid).children(recursive=True)]
        assert len(pids) == 2
        expected = sum(smaps_rollup_pss(pid) for pid in pids)
        measured = tree_pss(parent.pid)
        assert abs(measured - expected) <= 0.05 * expected
        assert measured > 100_000_000  # both buffers are counted
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()


def test_monitor_measures_pss_at_most_once_per_max_age(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "tree_pss", lambda pid: calls.append(pid) or 123)
    monitor = MemoryMonitor(max_age=60)
    first, second = monitor.read(), monitor.read()
    assert first.app_pss == second.app_pss == 123 and len(calls) == 1
    assert 0 < first.system_available <= first.system_total
    assert MemoryMonitor(max_age=0).read().app_pss == 123 and len(calls) == 2


def test_guard_refuses_new_replies_while_memory_is_low_and_resumes_by_itself():
    available = [3 * GIB]
    floor = MemoryFloor(2 * GIB, available=lambda: available[0])
    floor.check()
    available[0] = GIB // 2
    assert floor.is_low()
    with pytest.raises(MemoryLowError, match=r"0\.5 GiB available, below 2\.0 GiB.*try again"):
        floor.check()
    available[0] = 3 * GIB
    floor.check()  # recovered: no restart, no reset needed


def test_sidebar_shows_the_warning_when_memory_is_low():
    from telemetry.memory import memory_figures
    from ui.stats_panel import panel_props

    engine = EngineState("m", "int8", "bfloat16", "auto", 4096, running=1, waiting=2, kv_cache_usage=0.25)
    floor = MemoryFloor(2 * GIB)
    low = panel_props(engine, memory_figures(MemoryReading(GIB, 7 * GIB, GIB, 8 * GIB), floor), None, streaming=False)
    assert low["memory"]["low"] and low["memory"]["available_mib"] == 1024
    assert low["engine"] | {"model": None} == {"running": 1, "waiting": 2, "kv_cache_percent": 25.0, "model": None,
                                                 "weights": "int8", "dtype": "bfloat16", "threads": "auto", "context": 4096,
                                                 "speculation_accepted_percent": None}  # nothing proposed yet
    fine = panel_props(engine, memory_figures(MemoryReading(GIB, 4 * GIB, 4 * GIB, 8 * GIB), floor), None,
                       streaming=False)
    assert not fine["memory"]["low"]
