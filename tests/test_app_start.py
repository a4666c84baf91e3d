"""A misconfigured app stops at once with a message that says what to do, not a traceback."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("environment, message", [
    ({"CHAT_MODEL": "/nonexistent/model"}, "Model folder /nonexistent/model does not exist"),
    ({"CHAT_MODEL": str(ROOT), "CHAT_TEMPERATURE": "warm"}, "CHAT_TEMPERATURE='warm' is not a valid float"),
])
def test_bad_configuration_exits_with_a_clear_message(environment, message):
    result = subprocess.run([sys.executable, "-m", "chainlit", "run", "app.py", "--headless"],
                            cwd=ROOT, env={"PATH": "/usr/bin:/bin", **environment},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
