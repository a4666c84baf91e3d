"""A misconfigured app stops at once with a message that says what to do, not a traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

CHAINLIT = str(Path(sys.executable).parent / "chainlit")  # the command users type


def run(command: list[str], **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, env={"PATH": "/usr/bin:/bin", **environment},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("environment, message", [
    ({"CHAT_MODEL": "/nonexistent/model"}, "CHAT_MODEL=/nonexistent/model: there is no such folder or file"),
    ({"CHAT_MODEL": "{tiny}", "CHAT_KV_CACHE_GIB": "4096"}, "GiB of memory is available. Lower CHAT_KV_CACHE_GIB"),
    ({"CHAT_MODEL": "{tiny}", "CHAT_TEMPERATURE": "warm"}, "CHAT_TEMPERATURE='warm' is not a valid float"),
])
def test_bad_configuration_exits_with_a_clear_message(tiny_model_dir, environment, message):
    environment = {name: value.format(tiny=tiny_model_dir) for name, value in environment.items()}
    result = run([CHAINLIT, "run", "app.py", "--headless"], **environment)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_prepare_step_exits_with_a_clear_message():
    result = run([sys.executable, "-m", "modelprep"], CHAT_MODEL="/nonexistent/model.gguf")
    assert result.returncode == 2
    assert "Cannot prepare the model: CHAT_MODEL=/nonexistent/model.gguf: there is no such" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("first_name, name", [("engine.prepare", "modelprep"),
                                              ("engine.quantize", "modelprep.quantization"),
                                              ("engine.users", "web.accounts")])
def test_the_commands_first_names_still_run(first_name, name):
    """Client sites' scripts call the commands by the names they had before the code was split by job."""
    result = run([sys.executable, "-m", first_name, "--help"])
    assert result.returncode == 0 and result.stdout.startswith(f"usage: python -m {name} "), result.stderr


def test_a_damaged_database_stops_the_app_with_what_to_do(tiny_model_dir, tmp_path):
    (tmp_path / "chat.db").write_bytes(b"half a backup, not a database " * 1000)
    result = run([CHAINLIT, "run", "app.py", "--headless"], CHAT_MODEL=str(tiny_model_dir),
                 CHAT_DB=str(tmp_path / "chat.db"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"CHAT_DB={tmp_path / 'chat.db'} is not a usable SQLite database" in result.stderr
    assert "Move the file away" in result.stderr
