"""The composer's 分词 Tokenize command (`tokenize`): how the typed text splits into the model's tokens, with their
ids and counts, and its count in the other bundled demo models' tokenizers where those are on this machine.

Nothing is generated and nothing enters the conversation: the handler answers from the tokenizers alone. The
tokens are shown in the teaching view's element (`TokenView`), a character split over several tokens as its bytes.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import chainlit as cl
from transformers import AutoTokenizer

from config.errors import ModelLoadError
from modelprep.demo import DEMOS
from modelprep.source import resolve_model

COMMAND = {"id": "tokenize", "icon": "scissors", "button": True, "persistent": False,
           "description": "分词 Tokenize：显示这段文字如何切分为词元（不回答）· how this text splits into tokens (no reply)"}


def other_demos(cache_dir: Path, served: Path) -> dict[str, Path]:
    """The bundled demo models prepared in `cache_dir`, by name, except the one `served` is (or was made from)."""
    folders = {}
    for name in DEMOS:
        try:
            folder = resolve_model(name, cache_dir, prepare=False, weights="original")
        except ModelLoadError:
            continue  # not fetched on this machine: nothing to compare with
        if not served.name.startswith(folder.name):
            folders[name] = folder
    return folders


@lru_cache(maxsize=4)
def _tokenizer(folder: Path):
    return AutoTokenizer.from_pretrained(folder)


def count_in(folder: Path, text: str) -> int:
    """How many tokens `folder`'s tokenizer splits `text` into (loaded once; call off the event loop)."""
    return len(_tokenizer(folder).encode(text, add_special_tokens=False))


def report(text: str, tokens: list[tuple[int, str]], model: str, others: dict[str, int]) -> cl.Message:
    """The answer to the command: the counts, then the tokens in a `TokenView` with their ids shown."""
    count = len(tokens)
    lines = [f"✂️ **分词 Tokenize** · {model}: **{count} 个词元 tokens** · {len(text)} 个字符 characters"
             + (f" · {len(text) / count:.2f} 字符/词元 characters per token" if count else "")]
    for name, other in others.items():
        lines.append(f"- {name}: {other} 个词元 tokens" + (" (相同 the same)" if other == count else
                                                        f" ({other - count:+d})"))
    lines.append("\n仅分词，不生成回答，也不计入对话。 Only split: nothing was generated, and the conversation is "
                 "unchanged.")
    view = cl.CustomElement(name="TokenView", display="inline", props={
        "title": "词元（下标为编号） Tokens, each with its id", "ids": True,
        "tokens": [{"id": token, "text": piece} for token, piece in tokens]})
    return cl.Message(content="\n".join(lines), elements=[view])
