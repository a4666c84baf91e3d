"""Processes started by `spawn` without this process's main module.

A child started by Python's `spawn` first runs its parent's main module again (as `__mp_main__`), so that
functions defined there can be found. vLLM starts its engine-core process that way, from a parent whose main
module is Chainlit's command line (`chainlit run app.py`, which ./run.sh runs too): the engine core imported
Chainlit's whole web server, of which it uses nothing (its target lives in vLLM), at a cost in start-up time
and memory (docs/design-figures.md).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Processes spawned within the block do not run this process's main module."""
    main = sys.modules["__main__"]
    spec, path = main.__spec__, main.__dict__.pop("__file__", None)
    main.__spec__ = None  # how `spawn` finds a main module run by `python -m`
    try:
        yield
    finally:
        main.__spec__ = spec
        if path is not None:
            main.__file__ = path
