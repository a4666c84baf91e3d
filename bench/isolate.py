"""Run one benchmark function in a fresh Python process, so every system starts cold and alone.

Each system loads its own model and threads; running them one after another in one process would let
one's memory and thread pools bleed into the next one's figures. The function gets JSON-able keyword
arguments and returns a JSON-able result through a file.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from config.settings import PROJECT_ROOT


def run_isolated(function: str, env: dict[str, str] | None = None, **arguments) -> dict:
    """Call `module:function(**arguments)` in a new interpreter (with extra environment `env`)."""
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.json"
        subprocess.run([sys.executable, "-m", "bench.isolate", function, json.dumps(arguments), str(result)],
                       cwd=PROJECT_ROOT, env={**os.environ, **(env or {})}, check=True)
        return json.loads(result.read_text())


if __name__ == "__main__":
    module, name = sys.argv[1].split(":")
    output = getattr(importlib.import_module(module), name)(**json.loads(sys.argv[2]))
    Path(sys.argv[3]).write_text(json.dumps(output))
