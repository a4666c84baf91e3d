"""The fixed workload every system of the benchmark runs.

The tour guide's system prompt and its template, one user question of 20 to 60 tokens per chat, new to
the engine at every run (`questions`: only the persona's system prompt may come from vLLM's prefix cache),
128 new tokens per reply, greedy, end-of-sequence ignored so every system generates the same count, all
chats arriving at once (`harness.questions` and `harness.figures`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from config.settings import PROJECT_ROOT
from engine.prompt import RenderedPrompt, render_prompt
from harness.questions import questions, system_prompt

DEMO = "demo-0.5b"  # the model every benchmark runs unless told otherwise (their figures so far are all on it)
NEW_TOKENS = 128
CONCURRENCY = (1, 2, 4, 8)


def prompts(tokenizer, tag: str, users: int, max_model_len: int = 4096,
            new_tokens: int = NEW_TOKENS) -> list[RenderedPrompt]:
    """The rendered prompt of each of `users` chats, their questions tagged `tag` (see `questions`), leaving room for
    `new_tokens`."""
    system = system_prompt()
    return [render_prompt(tokenizer, system, [{"role": "user", "content": question}],
                          budget=max_model_len - new_tokens) for question in questions(tag, users)]


def stage_parser(name: str, doc: str, tokens: int, repeats: int) -> argparse.ArgumentParser:
    """The options every `python -m bench.NAME` shares: new tokens per reply, repeats, and where its JSON goes
    (`docs/benchmark/NAME.json` unless `--out`); `doc` is the module's docstring."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=doc.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=tokens, help="new tokens per reply")
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark" / f"{name}.json")
    return parser
