"""The model's tokenizer, shared by the web process's threads one call at a time.

Hugging Face's fast tokenizers may not be called from two threads at once ("Already borrowed"). vLLM makes its
tokenizer safe by lending each calling thread a deep copy from a pool, and makes a new copy whenever all are lent:
the pool grows to the most threads that ever tokenized at once, and keeps every copy (each holds the whole vocabulary
again: some 20 MB for Qwen's). The app tokenizes on whichever worker thread a reply's prompt, its passages' budget or
the Tokenize command runs on, so over a day of visitors the pool grew by a copy at each new peak (measured in a soak:
docs/performance.md). Here the app's calls take turns behind one lock instead: vLLM's pool keeps one copy for them.
A call takes milliseconds, so replies are not held up.
"""

from __future__ import annotations

import functools
import threading
from typing import Any


class SharedTokenizer:
    """`tokenizer`, each of its methods called by one thread at a time; its other attributes read as they are."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._tokenizer, name)
        if not callable(value):
            return value

        @functools.wraps(value)
        def one_at_a_time(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return value(*args, **kwargs)

        return one_at_a_time

    def __len__(self) -> int:
        with self._lock:
            return len(self._tokenizer)
