"""`python -m engine.quantize`, the command's first name, kept for the scripts that use it: it runs `python -m modelprep.quantization`.
Run, not imported: the engine depends on nothing of the command."""

import runpy

runpy.run_module("modelprep.quantization", run_name="__main__", alter_sys=True)
