"""`python -m engine.users`, the command's first name, kept for the scripts that use it: it runs `python -m web.accounts`.
Run, not imported: the engine depends on nothing of the command."""

import runpy

runpy.run_module("web.accounts", run_name="__main__", alter_sys=True)
