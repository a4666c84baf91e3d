"""A process spawned while the main module is hidden does not run it; otherwise it does (the test can fail)."""

import contextlib
import multiprocessing
import sys
import types

import pytest

from engine.spawn import main_module_hidden

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("hidden", [False, True])
def test_a_spawned_process_runs_the_main_module_unless_hidden(tmp_path, monkeypatch, hidden):
    marker = tmp_path / "ran"
    script = tmp_path / "main_script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    main = types.ModuleType("__main__")
    main.__file__, main.__spec__ = str(script), None  # as under `chainlit run`: a console script
    monkeypatch.setitem(sys.modules, "__main__", main)
    with main_module_hidden() if hidden else contextlib.nullcontext():
        process = multiprocessing.get_context("spawn").Process(target=print)
        process.start()
    process.join(timeout=60)
    assert process.exitcode == 0
    assert marker.exists() is not hidden
    assert main.__file__ == str(script) and main.__spec__ is None
