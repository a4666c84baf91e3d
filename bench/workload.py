"""The fixed workload every system runs, and how one run of it is summarised.

The tour guide's system prompt and its template, one user question of 20 to 60 tokens per chat, new to
the engine at every run (`questions`: only the persona's system prompt may come from vLLM's prefix cache),
128 new tokens per reply, greedy, end-of-sequence ignored so every system generates the same count, all
chats arriving at once. Times are seconds from that common arrival, taken at each system's token events.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.config import PROJECT_ROOT
from ui.personas import load_personas
from engine.prompt import RenderedPrompt, render_prompt

DEMO = "demo-0.5b"  # the model every benchmark runs unless told otherwise (their figures so far are all on it)
NEW_TOKENS = 128
CONCURRENCY = (1, 2, 4, 8)
QUESTIONS = [
    "我第一次来广州，只有一天时间，请帮我安排一条从早到晚的详细路线，包括交通方式和每个地方大概停留多久。",
    "广州早茶有哪些必点的点心？请逐一介绍它们的做法、口味和适合搭配的茶。",
    "Please plan a relaxed family day in Guangzhou with two young children, with a museum, a park and lunch.",
    "请详细介绍陈家祠的历史、建筑特色和参观时值得注意的细节，再推荐附近可以顺路去的地方。",
    "What should a first-time visitor know about Guangzhou's weather, transport and food? List practical tips.",
    "周末想带父母去广州周边玩两天，他们不喜欢太累，请推荐几个地方并说明每天的安排和理由。",
    "请为第一次来广州的游客写一份详细的美食清单，列出十道菜，每道菜说明味道和在哪里可以吃到。",
    "Write a detailed three-day Guangzhou itinerary for a couple who love history, food and photography.",
]


def system_prompt() -> str:
    return load_personas(PROJECT_ROOT / "prompts", "tour_guide")[0].system_prompt


def questions(tag: str, chats: int) -> list[str]:
    """One question per chat that no run tagged otherwise asked: the workload's (repeating after the eighth), each
    opened by `tag` and the chat's number, so a repeated run measures the model and not vLLM's prefix cache."""
    return [f"（第 {tag}-{chat} 位游客）{QUESTIONS[chat % len(QUESTIONS)]}" for chat in range(chats)]


def prompts(tokenizer, tag: str, users: int, max_model_len: int = 4096) -> list[RenderedPrompt]:
    """The rendered prompt of each of `users` chats, their questions tagged `tag` (see `questions`)."""
    system = system_prompt()
    return [render_prompt(tokenizer, system, [{"role": "user", "content": question}],
                          budget=max_model_len - NEW_TOKENS) for question in questions(tag, users)]


@dataclass(frozen=True)
class Reply:
    """One chat's reply: seconds from the common arrival to its first and last token, and its token count."""

    first_token: float
    last_token: float
    tokens: int

    @property
    def decode_rate(self) -> float:
        return (self.tokens - 1) / (self.last_token - self.first_token)


def summarise(replies: list[Reply]) -> dict:
    """Aggregate and per-user decode rates and first-token percentiles of one run of N chats."""
    first = sorted(reply.first_token for reply in replies)
    return {
        "users": len(replies),
        "aggregate_tokens_per_s": sum(reply.tokens for reply in replies) / max(reply.last_token for reply in replies),
        "per_user_tokens_per_s": statistics.fmean(reply.decode_rate for reply in replies),
        "ttft_p50_s": statistics.median(first),
        "ttft_p95_s": _percentile(first, 0.95),
        "replies": [asdict(reply) for reply in replies],
    }


def median_run(runs: list[dict]) -> dict:
    """Of repeated runs of one N, the one with the median aggregate rate; the others' rates are kept beside it.
    The machines are shared and noisy: one run of a few seconds can land on a busy moment."""
    ordered = sorted(runs, key=lambda run: run["aggregate_tokens_per_s"])
    return {**ordered[len(ordered) // 2], "repeats_aggregate_tokens_per_s": [run["aggregate_tokens_per_s"]
                                                                          for run in runs]}


def _percentile(ordered: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks, as numpy's default."""
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def stage_parser(name: str, doc: str, tokens: int, repeats: int) -> argparse.ArgumentParser:
    """The options every `python -m bench.NAME` shares: new tokens per reply, repeats, and where its JSON goes
    (`docs/benchmark/NAME.json` unless `--out`); `doc` is the module's docstring."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=doc.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=tokens, help="new tokens per reply")
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmark" / f"{name}.json")
    return parser
