"""The other bundled demo models' tokenizers, for the Tokenize command's comparison: found once at start among the
demo models prepared on this machine, each loaded when first asked, counted off the event loop."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from config.errors import ModelLoadError
from modelprep.demo import DEMOS
from modelprep.source import resolve_model


class DemoTokenizers:
    """The demo models prepared in `cache_dir`, by name, except the one `served` is (or was made from)."""

    def __init__(self, cache_dir: Path, served: Path) -> None:
        self.folders: dict[str, Path] = {}
        for name in DEMOS:
            try:
                folder = resolve_model(name, cache_dir, prepare=False, weights="original")
            except ModelLoadError:
                continue  # not fetched on this machine: nothing to compare with
            if not served.name.startswith(folder.name):
                self.folders[name] = folder

    def counts(self, text: str) -> dict[str, int]:
        """How many tokens each tokenizer splits `text` into (call off the event loop)."""
        return {name: len(_tokenizer(folder).encode(text, add_special_tokens=False))
                for name, folder in self.folders.items()}


@lru_cache(maxsize=4)
def _tokenizer(folder: Path):
    from transformers import AutoTokenizer  # torch: not for an app that never compares

    return AutoTokenizer.from_pretrained(folder)
